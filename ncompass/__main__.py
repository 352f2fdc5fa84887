"""``python -m ncompass`` is the command line."""

from ncompass.cli import main
from ncompass.session.tether import end_with_parent

if __name__ == "__main__":
    end_with_parent()  # a session's run ends with its session (nothing otherwise)
    main()
