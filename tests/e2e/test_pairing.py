"""SPEC H2 and H3 through a real `clankie serve`: pair with a one-time code over the
service's own socket, list, revoke. A code-paired credential is a browser's: its token is
refused on `/v1/ops` (it works only on the page, with the page's key), revoked or not."""

from __future__ import annotations

import pytest

from clankie.client import ApiError
from tests.e2e.served import Served


def test_h2_pair_list_revoke_through_a_real_service(served: Served):
    with served.client() as operator:
        started = operator.call("device_pair_start", {"name": "phone", "mode": "control"})
    with served.client(token="not-needed") as stranger:
        paired = stranger.call("device_pair_finish", {"code": started["code"]})
        with pytest.raises(ApiError) as err:
            stranger.call("device_pair_finish", {"code": started["code"]})
        assert err.value.code == "unauthenticated"
    with served.client(paired["token"]) as phone, pytest.raises(ApiError) as err:
        phone.call("conversation_list")
    assert err.value.code == "unauthenticated" and "page" in err.value.detail
    with served.client() as operator:
        [device] = [x for x in operator.call("credential_list")["credentials"]
                    if x["kind"] == "device"]
        assert (device["credential_id"], device["name"], device["revoked"]) == (
            started["pairing_id"], "phone", False)
        operator.call("credential_revoke", {"credential_id": device["credential_id"]})
    with served.client(paired["token"]) as phone, pytest.raises(ApiError) as err:
        phone.call("conversation_list")
    assert err.value.code == "unauthenticated"
    assert paired["token"] not in "".join(served.log)
