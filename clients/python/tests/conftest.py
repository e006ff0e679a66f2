from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import fencelog
from servers import FencelogServer, fencelog_bin, missing_binary_message


def pytest_sessionstart(session: pytest.Session) -> None:
    # Every suite here is about the real server; without the binary the run
    # must fail, saying why, rather than skip into a green result.
    path = fencelog_bin()
    if not path.exists():
        pytest.exit(missing_binary_message(path), returncode=1)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FencelogServer]:
    """One server for the tests that do not stop or restart it."""
    s = FencelogServer(tmp_path_factory.mktemp("shared") / "data").start()
    yield s
    s.stop()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., FencelogServer]]:
    """Starts a server of the test's own (to kill, restart, or configure);
    all of them are killed when the test ends."""
    started: List[FencelogServer] = []
    counter = itertools.count()

    def start(**kw) -> FencelogServer:
        s = FencelogServer(tmp_path / f"data{next(counter)}", **kw).start()
        started.append(s)
        return s

    yield start
    for s in started:
        s.kill9()


@pytest.fixture
def client(server: FencelogServer) -> Iterator[fencelog.Client]:
    with fencelog.Client(server.url) as c:
        yield c


_names = itertools.count()


@pytest.fixture
def stream(request: pytest.FixtureRequest) -> str:
    """A stream name no other test uses."""
    base = re.sub(r"[^A-Za-z0-9._:-]", "-", request.node.name)[:200]
    return f"{base}.{next(_names)}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
