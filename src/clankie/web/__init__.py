"""The phone page (SPEC section 12): `clankie serve --web` serves it (`clankie/serve.py`);
`app.py` routes, `views.py` answers, `shown.py` reads and says."""
