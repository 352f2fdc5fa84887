"""``python -m ncompass`` is the command line."""

from ncompass.cli import main

if __name__ == "__main__":
    main()
