import http.server


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(204)

    def log_message(self, *args):
        pass
