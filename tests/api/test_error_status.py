"""The HTTP status of each domain error is the HTTP boundary's table (``app.api.errors``):
``app.errors`` knows nothing of HTTP."""

from __future__ import annotations

import inspect

import pytest

import app.errors as errors
from app.api.errors import STATUS, status_of

EXPECTED = {
    errors.InvalidTextError("x"): 400,
    errors.TokenizerSpecError("x"): 500,
    errors.TemplateError("x"): 400,
    errors.BadRequestError("x"): 400,
    errors.ContextOverflowError(prompt_tokens=9, max_tokens=None, context=8): 400,
    errors.SystemTurnError(1, "x"): 400,
    errors.AuthenticationError("x"): 401,
    errors.PermissionDeniedError("x"): 403,
    errors.NotFoundError("x"): 404,
    errors.RequestTimeoutError("x"): 408,
    errors.PayloadTooLargeError("x"): 413,
    errors.ClientDisconnectedError("x"): 499,
    errors.UpstreamUnavailableError("x"): 502,
    errors.UpstreamUnreachableError("x"): 502,
    errors.UpstreamTruncatedError("x"): 502,
    errors.UpstreamRetokenizedError("x"): 502,
    errors.UpstreamMalformedError("x"): 502,
    errors.UpstreamTooLargeError("x"): 502,
    errors.UpstreamNotReadyError("x"): 503,
    errors.UpstreamTimeoutError("x"): 504,
    errors.UpstreamStatusError("x", upstream_status=500): 502,
    errors.UpstreamStatusError("x", upstream_status=503): 502,
    errors.UpstreamStatusError("x", upstream_status=400): 400,
    errors.UpstreamStatusError("x", upstream_status=422): 422,
}


@pytest.mark.parametrize(("error", "status"), EXPECTED.items(), ids=repr)
def test_each_error_class_has_its_status(error: errors.TokspliceError, status: int) -> None:
    assert status_of(error) == status


def test_the_domain_errors_carry_no_status() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.TokspliceError)]  # fmt: skip
    assert {type(e) for e in EXPECTED} == set(classes) - {errors.TokspliceError,
                                                         errors.RequestError,
                                                         errors.UpstreamError}  # fmt: skip
    assert not any("status" in vars(c) for c in classes)
    assert set(STATUS) <= set(classes)
