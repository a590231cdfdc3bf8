"""--scheduler: a malformed address is one line at once; an address nothing answers at is one line
within the connect timeout (5 s by default, --scheduler-timeout S to change it), with no
traceback when the interpreter exits. Only 127.0.0.1 is used: a refused port, and a listener of
our own that accepts connections and says nothing (or sends garbage)."""

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path, *extra, timeout=30):
    out = tmp_path / "o"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "wus_sim", "run", "quickstart", "--out", str(out), "-q",
                           "--no-plots", *extra], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    return proc.returncode, lines, time.monotonic() - t0, out


@pytest.mark.parametrize("address", ["not a url", "tcp://", "tcp://:::", "foo://bar:1", "tcp://127.0.0.1:abc",
                                     "127.0.0.1:99999", "tcp://127.0.0.1:0", "x" * 5000])
def test_a_malformed_address_is_one_line_at_once(tmp_path, address):
    code, lines, wall, out = _run(tmp_path, "--scheduler", address)
    assert code == 2 and len(lines) == 1 and "--scheduler" in lines[0], lines
    assert wall < 5 and not out.exists()  # refused before the run folder is made
    assert len(lines[0]) < 400


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_port_nothing_listens_on_is_one_line_within_the_timeout(tmp_path):
    code, lines, wall, out = _run(tmp_path, "--scheduler", f"tcp://127.0.0.1:{_free_port()}")
    assert code == 2 and len(lines) == 1 and "cannot reach" in lines[0], lines
    assert wall < 5 and not out.exists()


@pytest.fixture(params=["silent", "garbage"])
def listener(request):
    """A TCP listener on 127.0.0.1 that accepts and then says nothing, or sends bytes that are
    not Dask's protocol."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held, stop = [], threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)
            if request.param == "garbage":
                try:
                    conn.sendall(b"\xff" * 64 + b"HTTP/1.1 200 OK\r\n\r\n")
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_listener_that_is_not_a_scheduler_is_one_line_within_the_timeout(tmp_path, listener):
    code, lines, wall, _ = _run(tmp_path, "--scheduler", listener, "--scheduler-timeout", "1")
    assert code == 2 and len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], lines
    assert wall < 8, wall  # 1 s to connect, then the interpreter's exit; no 20-40 s waits


@pytest.mark.parametrize("value", ["0", "-1", "1e9", "nan"])
def test_the_timeout_option_has_a_declared_range(tmp_path, value):
    code, lines, _, _ = _run(tmp_path, "--scheduler", "tcp://127.0.0.1:1", "--scheduler-timeout", value)
    assert code == 2 and len(lines) == 1 and "--scheduler-timeout" in lines[0], lines
