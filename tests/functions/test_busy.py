"""A held control lock (spotbench.lease.Busy) is a retryable JSON 503 with Retry-After on
every HTTP surface."""

from __future__ import annotations

import json
from types import SimpleNamespace

from functions import app, lambda_handler, main
from spotbench import control
from spotbench.auth import Caller


def test_a_held_control_lock_answers_503_with_retry_after(monkeypatch):
    def held(*args, **kwargs):
        raise control.Busy("the sweep's control lock is held by start", 7)

    monkeypatch.setitem(app.ACTIONS, "done", held)
    status, payload = app.handle("done", {"group": "g"}, Caller("member", "m"),
                                 SimpleNamespace(sweep=None))
    assert status == 503 and payload["retry_after_s"] == 7
    assert "held by start" in payload["error"]
    reply = main._reply(status, payload)
    assert reply.status_code == 503 and reply.headers["Retry-After"] == "7"
    assert json.loads(reply.get_data())["retry_after_s"] == 7
    url_answer = lambda_handler._response(status, payload)
    assert url_answer["statusCode"] == 503 and url_answer["headers"]["Retry-After"] == "7"
    assert "Retry-After" not in main._reply(200, {"ok": True}).headers
