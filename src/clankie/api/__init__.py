"""The HTTP dispatcher: `POST /v1/ops/{op}` onto the service, errors as RFC 9457 problems.

`app` is the ASGI app and its server; `clankie serve` (`clankie/serve.py`, above this
package and the page's) starts them. This package imports neither on its own (serve loads
the HTTP layer while start-up recovery runs), and never imports the page (`clankie.web`)."""
