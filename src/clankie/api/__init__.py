"""The HTTP dispatcher: `POST /v1/ops/{op}` onto the service, errors as RFC 9457 problems.

`app` is the ASGI app and its server, `server` is `clankie serve` around them; this package
imports neither on its own (serve loads the HTTP layer while start-up recovery runs)."""
