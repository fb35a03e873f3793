"""A stand-in for the Hugging Face hub on 127.0.0.1: it answers ``huggingface_hub``'s HEAD
(commit, etag = sha256, size) and GET for ``/{repo}/resolve/{revision}/{file}``, and counts the
downloads, so the real ``hf_hub_download`` can be tested with no internet."""
from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubStandIn:
    def __init__(self, files: dict[tuple[str, str], Path]):
        """``files``: (repo_id, filename) -> the local file to serve."""
        self.files = {key: Path(p).read_bytes() for key, p in files.items()}
        self.gets: list[str] = []
        self.heads: list[str] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _find(self):
                for (repo, name), data in stand_in.files.items():
                    prefix = f"/{repo}/resolve/"
                    if self.path.startswith(prefix) and self.path.endswith("/" + name):
                        return data
                return None

            def _headers(self, data):
                self.send_response(200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()

            def do_HEAD(self):
                stand_in.heads.append(self.path)
                data = self._find()
                if data is None:
                    self.send_error(404)
                    return
                self._headers(data)

            def do_GET(self):
                stand_in.gets.append(self.path)
                data = self._find()
                if data is None:
                    self.send_error(404)
                    return
                self._headers(data)
                for i in range(0, len(data), 4096):   # in pieces, so progress moves
                    self.wfile.write(data[i:i + 4096])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
