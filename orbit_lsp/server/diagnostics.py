"""Placeholder: being written."""

from orbit_lsp.server.app import OrbitServer


class Feature:
    def __init__(self, server: OrbitServer):
        self.server = server

    def register(self) -> None:
        pass
