"""The phone page (SPEC section 12): `clankie serve --web` serves it; see `app.py`."""
