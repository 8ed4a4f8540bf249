"""Read-only questions to the local Docker engine over its Unix socket, without docker-py.

Why: importing docker-py (with requests and urllib3) costs 0.1-0.7 s depending on the machine's
load, more than everything else a fully cached rerun does. Such a rerun only needs to ask the
engine three things - the image's id (part of every cache key), lodevem's leftover containers
(to sweep), the engine's version (for the manifest) - so those are asked here with the
standard library's ``http.client``; docker-py is imported only when a container must be
created or removed.

Only the local socket is spoken to (``DOCKER_HOST`` unset or ``unix://...``); any other
``DOCKER_HOST`` (tcp, ssh, TLS settings) returns ``None`` from ``EngineAPI.from_env`` and the
caller uses docker-py as before.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Any, Optional

DEFAULT_SOCKET = "/var/run/docker.sock"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class ListedContainer:
    """A container as the engine lists it: what ``sweep_stale_containers`` looks at."""

    id: str
    labels: dict[str, str]


class EngineAPI:
    """GET requests to the engine's API; each raises ``OSError`` when the engine does not answer."""

    def __init__(self, socket_path: str, timeout: float = 10.0) -> None:
        self.socket_path, self.timeout = socket_path, timeout

    @classmethod
    def from_env(cls, timeout: float = 10.0) -> Optional["EngineAPI"]:
        """The local socket ``$DOCKER_HOST`` names (default ``/var/run/docker.sock``), or None
        when it names something else (docker-py then handles it)."""
        host = os.environ.get("DOCKER_HOST", "")
        if not host:
            return cls(DEFAULT_SOCKET, timeout)
        if host.startswith("unix://"):
            return cls(host[len("unix://"):], timeout)
        return None

    def _get(self, path: str) -> tuple[int, Any]:
        connection = _UnixConnection(self.socket_path, self.timeout)
        try:
            connection.request("GET", path, headers={"Host": "docker"})
            response = connection.getresponse()
            body = response.read()
        except (http.client.HTTPException, ValueError) as exc:
            raise OSError(f"the Docker engine gave an unreadable answer ({exc})") from None
        finally:
            connection.close()
        try:
            return response.status, json.loads(body) if body else None
        except ValueError:
            raise OSError("the Docker engine gave an answer that is not JSON") from None

    def image_id(self, name: str) -> Optional[str]:
        """The id (``sha256:...``) of image ``name``; None when the engine has no such image."""
        status, data = self._get(f"/images/{urllib.parse.quote(name, safe='')}/json")
        if status == 404:
            return None
        if status != 200 or not isinstance(data, dict) or not isinstance(data.get("Id"), str):
            raise OSError(f"the Docker engine answered {status} for image {name}")
        return data["Id"]

    def containers(self, label: str) -> list[ListedContainer]:
        """Every container (running or not) carrying ``label`` (``key=value``)."""
        filters = urllib.parse.quote(json.dumps({"label": [label]}, allow_nan=False))
        status, data = self._get(f"/containers/json?all=1&filters={filters}")
        if status != 200 or not isinstance(data, list):
            raise OSError(f"the Docker engine answered {status} when listing containers")
        return [ListedContainer(str(c.get("Id", "")), dict(c.get("Labels") or {})) for c in data if isinstance(c, dict)]

    def version(self) -> Optional[str]:
        status, data = self._get("/version")
        return str(data.get("Version")) if status == 200 and isinstance(data, dict) and data.get("Version") else None
