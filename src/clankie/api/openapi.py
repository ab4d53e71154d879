"""The OpenAPI document of the dispatcher, generated from the op table in `clankie.dto`.

Owns only the document: one `POST /v1/ops/{op}` path per op of the table (`dto.OPS`, or
the table a service serves), its request schema (the strict input DTO), its 200 schema
(the output DTO), its problem responses and its security (a bearer token, except for an op
whose input is its own credential).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from clankie import __version__, dto

# Which problem statuses each op can answer with, beyond the ones every op has.
_COMMON = (401, 403, 404, 413, 422, 503)
_ANSWERING = (409,)


@cache
def build_openapi(ops: tuple[dto.Op[Any, Any], ...] = tuple(dto.OPS.values())
                  ) -> dict[str, Any]:
    inputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (spec.input, "validation") for spec in ops]
    outputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (spec.output, "serialization") for spec in ops]
    refs, definitions = models_json_schema(
        [*inputs, *outputs, (dto.Problem, "serialization")],
        ref_template="#/components/schemas/{model}")
    problem_ref = refs[(dto.Problem, "serialization")]
    paths: dict[str, Any] = {}
    for spec in ops:
        responses: dict[str, Any] = {
            "200": {"description": "The result.",
                    "content": {"application/json": {
                        "schema": refs[(spec.output, "serialization")]}}},
        }
        for status in (*_COMMON, *_ANSWERING, 500):
            responses[str(status)] = {
                "description": "A problem document; `code` says which (SPEC section 10).",
                "content": {"application/problem+json": {"schema": problem_ref}}}
        paths[f"/v1/ops/{spec.name}"] = {"post": {
            "operationId": spec.name,
            "summary": spec.name.replace("_", " "),
            # No bearer token is read for an op whose input is its credential (H2).
            "security": [] if spec.credential_in_body else [{"bearer": []}],
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": refs[(spec.input, "validation")]}}},
            "responses": responses,
        }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "clankie dispatcher", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": definitions.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
