"""Serve a built book over HTTP with gzip, as a web host does.

`python -m http.server` sends every file uncompressed, which no real host
does for text; measuring a page that way weighs it several times over. This
server compresses text files (HTML, CSS, JavaScript, SVG, JSON) with gzip at
level 6 when the browser accepts it, and sends images and fonts as they are.

    python -m tools.serve _build/html [--port 8000]

`serve(folder)` starts one in a thread and returns it (its `.url`); call
`.shutdown()` to stop it. `gzip_size(path)` is the size the server sends.
"""
import argparse
import functools
import gzip
import http.server
import io
import threading
from pathlib import Path

COMPRESSED = {".html", ".css", ".js", ".mjs", ".svg", ".json", ".txt", ".map",
              ".xml", ".ttf", ".otf", ".ico"}


def compresses(path):
    return Path(path).suffix.lower() in COMPRESSED


@functools.lru_cache(maxsize=4096)
def _gzipped(path, mtime_ns, size):
    return gzip.compress(Path(path).read_bytes(), compresslevel=6, mtime=0)


def gzip_size(path):
    """Bytes of the body the server sends for `path` (gzip or not)."""
    path = Path(path)
    if not compresses(path):
        return path.stat().st_size
    stat = path.stat()
    return len(_gzipped(str(path), stat.st_mtime_ns, stat.st_size))


class GzipHandler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file() or not compresses(path) or \
                "gzip" not in self.headers.get("Accept-Encoding", ""):
            return super().send_head()
        stat = path.stat()
        body = _gzipped(str(path), stat.st_mtime_ns, stat.st_size)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Vary", "Accept-Encoding")
        self.end_headers()
        return io.BytesIO(body)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def serve(folder, port=0):
    """Serve `folder` on 127.0.0.1 in a daemon thread; returns the server."""
    handler = functools.partial(GzipHandler, directory=str(folder))
    server = Server(("127.0.0.1", port), handler)
    server.url = f"http://127.0.0.1:{server.server_address[1]}/"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    server = serve(args.folder, args.port)
    print(f"Serving {args.folder} with gzip at {server.url} (Ctrl-C stops)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
