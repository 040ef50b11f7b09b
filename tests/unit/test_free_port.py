"""silt.free_ports.free_port: a port for a server to bind soon after, out of the way of the ports
the kernel gives outgoing connections, and never handed to two callers, in one process or in
two, within the reservation's time."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from silt import free_ports

ROOT = Path(__file__).resolve().parents[2]


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


@pytest.fixture(autouse=True)
def own_reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ports" / "reserved.json"
    monkeypatch.setattr(free_ports, "reservations_path", lambda: path)
    return path


def _bindable_pair() -> range:
    """Two neighbouring ports in the drawing range that nothing holds now."""
    for low in range(free_ports.FREE_PORTS.start + 4000, free_ports.FREE_PORTS.stop - 1, 7):
        if free_ports._bindable("127.0.0.1", low) and free_ports._bindable("127.0.0.1", low + 1):
            return range(low, low + 2)
    raise AssertionError("no two free neighbouring ports")


def test_free_ports_are_bindable_and_below_the_ephemeral_range() -> None:
    ports = {free_ports.free_port() for _ in range(20)}
    assert len(ports) == 20  # drawn, and none handed out twice
    for port in ports:
        assert port in free_ports.FREE_PORTS and port < _ephemeral_low()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        # The range is that one port: nothing free in it, so the kernel's answer.
        monkeypatch.setattr(free_ports, "FREE_PORTS", range(taken, taken + 1))
        assert free_ports.free_port() != taken


def test_a_port_handed_out_is_not_handed_out_again_while_reserved(monkeypatch: pytest.MonkeyPatch) -> None:
    pair = _bindable_pair()
    monkeypatch.setattr(free_ports, "FREE_PORTS", pair)
    first, second = free_ports.free_port(), free_ports.free_port()
    assert {first, second} == set(pair)
    # Both still free, both reserved: the kernel's answer, outside the range.
    assert free_ports.free_port() not in pair


def test_another_process_skips_the_ports_this_one_was_given(
    own_reservations: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = _bindable_pair()
    monkeypatch.setattr(free_ports, "FREE_PORTS", pair)
    mine = free_ports.free_port()
    script = (
        "import sys; from pathlib import Path; from silt import free_ports\n"
        f"free_ports.reservations_path = lambda: Path({str(own_reservations)!r})\n"
        f"free_ports.FREE_PORTS = range({pair.start}, {pair.stop})\n"
        "print(free_ports.free_port())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert int(done.stdout) == ({*pair} - {mine}).pop()


def _ended_process() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait(timeout=60)
    return done.pid


def _one_port_reserved_long_ago(own_reservations: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, float]:
    """The drawing range narrowed to one free port; a time past the reservations' window."""
    pair = _bindable_pair()
    monkeypatch.setattr(free_ports, "FREE_PORTS", range(pair.start, pair.start + 1))
    own_reservations.parent.mkdir(mode=0o700)
    return pair.start, time.time() - free_ports.RESERVATION_SECONDS - 1


def test_an_old_reservation_of_an_ended_process_frees_its_port(
    own_reservations: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, stale = _one_port_reserved_long_ago(own_reservations, monkeypatch)
    pair = range(port, port + 1)
    gone = _ended_process()
    own_reservations.write_text(json.dumps({str(pair.start): [stale, gone], "1": [stale, gone]}))
    assert free_ports.free_port() == pair.start
    # Those no longer in force are dropped as the file is written back.
    assert json.loads(own_reservations.read_text()) == {
        str(pair.start): [pytest.approx(time.time(), abs=60), os.getpid()]
    }


def test_a_live_process_keeps_its_ports_past_the_window(
    own_reservations: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A service down between a kill and its restart leaves its port unbound for a while: the
    # process that will restart it still holds it.
    port, stale = _one_port_reserved_long_ago(own_reservations, monkeypatch)
    pair = range(port, port + 1)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as holder:
        try:
            own_reservations.write_text(json.dumps({str(pair.start): [stale, holder.pid]}))
            assert free_ports.free_port() != pair.start
        finally:
            holder.kill()


def test_a_damaged_reservations_file_is_started_over(own_reservations: Path) -> None:
    own_reservations.parent.mkdir(mode=0o700)
    own_reservations.write_text('{"12345": ')
    port = free_ports.free_port()
    assert port in free_ports.FREE_PORTS
    assert json.loads(own_reservations.read_text()) == {str(port): [pytest.approx(time.time(), abs=60), os.getpid()]}


def test_a_directory_others_can_write_is_not_trusted_and_ports_still_come(own_reservations: Path) -> None:
    own_reservations.parent.mkdir()
    os.chmod(own_reservations.parent, 0o777)
    assert free_ports.free_port() in free_ports.FREE_PORTS
    assert not own_reservations.exists()


def test_a_held_lock_is_waited_for_boundedly(own_reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(free_ports, "_LOCK_WAIT_SECONDS", 0.2)
    own_reservations.parent.mkdir(mode=0o700)
    holder = os.open(own_reservations.with_name("lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        started = time.monotonic()
        # Another open file description of the same file: flock conflicts with it as with
        # another process.
        assert free_ports.free_port() in free_ports.FREE_PORTS
        assert time.monotonic() - started < 5
        assert not own_reservations.exists()  # not recorded without the lock
    finally:
        os.close(holder)


def test_when_every_port_in_range_is_reserved_the_kernel_gives_one(monkeypatch: pytest.MonkeyPatch) -> None:
    pair = _bindable_pair()
    monkeypatch.setattr(free_ports, "FREE_PORTS", range(pair.start, pair.start + 1))
    assert free_ports.free_port() == pair.start
    # Free, but promised to this process: never handed out again, not even unrecorded.
    assert free_ports.free_port() not in pair


def test_pids_that_cannot_be_a_process_hold_nothing(own_reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port, stale = _one_port_reserved_long_ago(own_reservations, monkeypatch)
    pair = range(port, port + 1)
    # -1 would signal every process (and so look alive), 0 the caller's group; 2**70 overflows.
    for pid in (-1, 0, 2**70, True):
        own_reservations.write_text(json.dumps({str(pair.start): [stale, pid]}))
        assert free_ports.free_port() == pair.start, pid
        own_reservations.unlink()


def test_the_file_is_replaced_whole_and_left_private(own_reservations: Path) -> None:
    free_ports.free_port()
    inode = own_reservations.stat().st_ino
    free_ports.free_port()
    assert own_reservations.stat().st_ino != inode  # a new file renamed over the old one
    assert own_reservations.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in own_reservations.parent.iterdir()) == ["lock", "reserved.json"]
