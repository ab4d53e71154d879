"""Issue 32: the page's endpoints are small named views over the same service (datasette's
`BaseView` style): `create_web_app` only routes, each route to one `View` subclass of its
own, behind the guard of H4; the shared checks (H3's two halves, H4's Origin and CSRF)
live once, in the base."""

from __future__ import annotations

from starlette.routing import Route

from clankie.web import views
from clankie.web.app import create_web_app
from tests.world import World

LISTENER = "http://127.0.0.1:8765"


def test_issue32_h4_each_route_is_one_named_view_behind_the_guard(world: World):
    guarded = create_web_app(world.service, LISTENER)
    app = guarded.app  # type: ignore[attr-defined]  # H4: the guard stands before it
    kinds = []
    for route in app.routes:
        assert isinstance(route, Route)
        handler = route.endpoint
        view = handler.__self__  # type: ignore[attr-defined]
        assert isinstance(view, views.View) and handler.__name__ == "handle", route.path
        kinds.append(type(view))
    assert len(kinds) == len(set(kinds)) == 13  # one view, one job, per endpoint
    assert views.View not in kinds and views.Action not in kinds


def test_issue32_h3_h4_the_checks_are_the_bases_and_no_view_has_its_own():
    for name in ("session", "same_origin", "checked_post", "handle"):
        owners = [kind for kind in (views.View, *_subclasses(views.View))
                  if name in vars(kind)]
        assert owners == [views.View], (name, owners)


def _subclasses(kind: type) -> list[type]:
    found = []
    for sub in kind.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found
