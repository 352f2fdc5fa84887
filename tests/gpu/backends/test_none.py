"""The none backend opens what was asked and reads nothing."""

from ncompass.gpu._backends.none import NoneBackend


def test_opens_requested_devices_and_reads_nothing() -> None:
    backend = NoneBackend()
    assert [info.index for info in backend.open((2, 3), 0.2)] == [2, 3]
    assert backend.read(0, 0) == []
    assert backend.notes() == []
    backend.close()


def test_all_is_device_zero_because_nothing_can_count_devices() -> None:
    assert [info.index for info in NoneBackend().open(None, 0.2)] == [0]
