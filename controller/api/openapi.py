"""The controller API as OpenAPI 3.1 (served at ``/api/v1/openapi.json``). A test holds it to the routes
``controller.dashboard.api`` serves, method by method, so the two cannot drift apart."""

from __future__ import annotations

from typing import Any

ERRORS = {
    "400": "bad JSON, or a job `panio job check` refuses (its message, file, line and column)",
    "401": "no token, or an unknown one",
    "403": "refused, with the reason: revoked, expired, a reader submitting, a target outside the allow list "
           "(submitting to it, cancelling or reading its jobs), not an operator (leases)",
    "404": "no such job, artifact, target, schedule or bisection",
    "409": "a schedule of that name exists",
    "503": "the lab failed: the results database or the broker",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _answers(ok: str, schema: dict[str, Any], description: str, *errors: str) -> dict[str, Any]:
    out = {ok: _json(schema, description)}
    for code in errors:
        out[code] = _json(_ref("Error"), ERRORS[code])
    return out


JOB_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}

SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error", "exit", "message"], "properties": {
        "error": {"type": "string", "description": "the error's name (docs/exit-status.md): auth_failed, refused, ..."},
        "exit": {"type": "integer", "description": "the exit status the CLI gives for it"},
        "message": {"type": "string"}, "hint": {"type": "string"}}, "additionalProperties": True},
    "Submit": {"type": "object", "required": ["toml"], "properties": {
        "toml": {"type": "string", "description": "the job file's text (docs/jobs.md), at most 1 MiB"},
        "file": {"type": "string", "description": "its name, as errors name it (default job.toml)"},
        "target": {"type": ["string", "null"], "description": "run on this target instead of the file's"},
        "deadline_s": {"type": ["number", "null"], "exclusiveMinimum": 0}}},
    "Queued": {"type": "object", "properties": {
        "job_id": {"type": "integer"}, "name": {"type": "string"}, "target": {"type": "string"},
        "queue": {"type": "string", "description": "the host's queue, or `embedded`: the controller runs it"},
        "deadline_at": {"type": ["number", "null"]}}},
    "Job": {"type": "object", "additionalProperties": True, "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "target": {"type": "string"},
        "state": {"enum": ["queued", "running", "done"]},
        "health": {"type": ["string", "null"], "description": "complete, incomplete, canceled, timed_out"},
        "result": {"type": ["string", "null"], "description": "passed, failed"},
        "reason": {"type": ["string", "null"]},
        "steps": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        "overrides": {"type": "array", "items": {"type": "object", "additionalProperties": True}}}},
    "SubmitSuite": {"type": "object", "required": ["toml", "jobs"], "properties": {
        "toml": {"type": "string", "description": "the suite file's text (docs/jobs.md#suites)"},
        "file": {"type": "string", "description": "its name; job files are relative to it"},
        "jobs": {"type": "object", "additionalProperties": {"type": "string"},
                 "description": "each job file's text, by the name the suite's `jobs` gives it"},
        "deadline_s": {"type": ["number", "null"], "exclusiveMinimum": 0}}},
    "QueuedSuite": {"type": "object", "properties": {
        "suite": {"type": "string"}, "deadline_at": {"type": ["number", "null"]},
        "jobs": {"type": "array", "items": _ref("Queued")}}},
    "Message": {"type": "object", "properties": {"message": {"type": "string"}}},
    "Lease": {"type": "object", "additionalProperties": True, "properties": {
        "target": {"type": "string"}, "holder": {"type": ["string", "null"]}, "job": {"type": ["integer", "null"]},
        "token": {"type": "integer", "description": "the fencing token (never the lease's secret)"},
        "ttl_left_s": {"type": ["number", "null"]}}},
    "Schedule": {"type": "object", "additionalProperties": True, "properties": {
        "name": {"type": "string"}, "suite": {"type": "string", "description": "the suite file on the controller"},
        "at": {"type": ["string", "null"]}, "every_s": {"type": ["number", "null"]},
        "next_due": {"type": "number"}, "last_jobs": {"type": ["array", "null"]},
        "problem": {"type": ["string", "null"]}}},
    "AddSchedule": {"type": "object", "required": ["name", "toml", "jobs"], "properties": {
        "name": {"type": "string"}, "at": {"type": "string", "description": "HH:MM, every day (or `every`)"},
        "every": {"type": "string", "description": "a duration: 30m, 6h, 1d (or `at`)"},
        "toml": {"type": "string", "description": "the suite file's text"},
        "file": {"type": "string", "description": "its name; job files are relative to it"},
        "jobs": {"type": "object", "additionalProperties": {"type": "string"},
                 "description": "each job file's text, by the name the suite's `jobs` gives it"}}},
    "Artifact": {"type": "object", "properties": {"name": {"type": "string"}, "bytes": {"type": "integer"}}},
    "BisectSummary": {"type": "object", "additionalProperties": True, "properties": {
        "id": {"type": "integer"}, "target": {"type": ["string", "null"]}, "tag": {"type": ["string", "null"]},
        "state": {"enum": ["running", "done", "stopped", "failed"]}, "good": {"type": "string"},
        "bad": {"type": "string"}, "left": {"type": "integer", "description": "builds between good and bad"},
        "first_bad": {"type": ["string", "null"]}, "probes": {"type": "integer"}}},
    "Bisect": {"type": "object", "additionalProperties": True,
               "description": "as `panio bisect status ID --json` (docs/bisect.md), plus `steps`", "properties": {
                   "id": {"type": "integer"}, "state": {"enum": ["running", "done", "stopped", "failed"]},
                   "builds": {"type": "array", "items": {"type": "string"}}, "good": {"type": "string"},
                   "bad": {"type": "string"}, "first_bad": {"type": ["string", "null"]},
                   "signature": {"type": ["object", "null"], "description": "the bad build's failure"},
                   "probes": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
                   "running": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
                   "steps": {"type": "array", "description": "each judged probe in the order it was judged, with "
                             "the range after it (good, bad, left)",
                             "items": {"type": "object", "additionalProperties": True}}}},
}

PATHS: dict[str, Any] = {
    "/api/v1/jobs": {
        "get": {"summary": "jobs, newest first, without their steps (a token with an allow list: its targets' "
                           "only)", "parameters": [
            {"name": "target", "in": "query", "schema": {"type": "string"}},
            {"name": "state", "in": "query", "schema": {"enum": ["queued", "running", "done"]}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}}],
            "responses": _answers("200", {"type": "array", "items": _ref("Job")}, "the jobs", "400", "401", "403")},
        "post": {"summary": "submit a job (reader: 403; submitter: only on its allow list)",
                 "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("Submit")}}},
                 "responses": {**_answers("201", _ref("Queued"), "queued (or started by the controller)",
                                          "400", "401", "403", "503"),
                               "413": {"description": "a body over 1 MiB, refused before it is read"}}},
    },
    "/api/v1/suites": {"post": {
        "summary": "submit a suite: every job of its matrix (reader: 403; submitter: all on its allow list)",
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("SubmitSuite")}}},
        "responses": {**_answers("201", _ref("QueuedSuite"), "every job recorded and queued (or started)",
                                 "400", "401", "403", "503"),
                      "413": {"description": "a body over 1 MiB, refused before it is read"}}}},
    "/api/v1/jobs/{id}": {"get": {"summary": "a job with its steps (and their output) and overrides (403 outside "
                                             "the token's allow list)",
                                  "parameters": [JOB_ID],
                                  "responses": _answers("200", _ref("Job"), "the job", "401", "403", "404")}},
    "/api/v1/jobs/{id}/cancel": {"post": {
        "summary": "cancel a queued or running job (submitter: only on its allow list)", "parameters": [JOB_ID],
        "responses": _answers("200", _ref("Message"), "what happened", "401", "403", "404")}},
    "/api/v1/jobs/{id}/artifacts": {"get": {
        "summary": "a job's artifacts: step logs, the results store's, junit.xml once done", "parameters": [JOB_ID],
        "responses": _answers("200", {"type": "array", "items": _ref("Artifact")}, "names and sizes",
                              "401", "403", "404")}},
    "/api/v1/jobs/{id}/artifacts/{name}": {"get": {
        "summary": "one artifact's bytes",
        "parameters": [JOB_ID, {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "the artifact",
                              "content": {"application/octet-stream": {"schema": {"type": "string",
                                                                                  "format": "binary"}}}},
                      **{c: _json(_ref("Error"), ERRORS[c]) for c in ("401", "403", "404")}}}},
    "/api/v1/targets/{name}/break-lease": {"post": {
        "summary": "break a target's lease (operators only; recorded as `panio lease break` records it)",
        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": _answers("200", _ref("Message"), "what happened", "401", "403", "404")}},
    "/api/v1/leases": {"get": {
        "summary": "the lab's held leases, as `panio lease list` (operators only; `breaks=1`: the recorded breaks)",
        "parameters": [{"name": "breaks", "in": "query", "schema": {"enum": ["0", "1"]}}],
        "responses": _answers("200", {"type": "array", "items": _ref("Lease")}, "the leases", "401", "403")}},
    "/api/v1/schedules": {
        "get": {"summary": "the schedules, as `panio schedule list`",
                "responses": _answers("200", {"type": "array", "items": _ref("Schedule")}, "the schedules", "401",
                                      "403")},
        "post": {"summary": "schedule a suite (reader: 403; submitter: only a suite on its allow list); kept on the "
                            "controller, fired by `panio schedule serve`",
                 "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("AddSchedule")}}},
                 "responses": {**_answers("201", _ref("Schedule"), "scheduled", "400", "401", "403", "409", "503"),
                               "413": {"description": "a body over 1 MiB, refused before it is read"}}}},
    "/api/v1/schedules/{name}": {"delete": {
        "summary": "remove a schedule (an operator, or a submitter whose allow list covers its suite)",
        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": _answers("200", _ref("Message"), "removed", "401", "403", "404")}},
    "/api/v1/bisects": {"get": {
        "summary": "bisections, newest first (a token with an allow list: those on its boards only)",
        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}}],
        "responses": _answers("200", {"type": "array", "items": _ref("BisectSummary")}, "the bisections",
                              "400", "401")}},
    "/api/v1/bisects/{id}": {"get": {
        "summary": "a bisection as `panio bisect status ID --json`, plus the range after each probe (403 outside "
                   "the token's allow list)", "parameters": [JOB_ID],
        "responses": _answers("200", _ref("Bisect"), "the bisection", "401", "403", "404")}},
    "/api/v1/openapi.json": {"get": {"summary": "this description", "security": [],
                                     "responses": {"200": {"description": "OpenAPI 3.1"}}}},
}


def describe() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("panio")
    except PackageNotFoundError:  # a source tree that was never installed
        installed = "unknown"
    return {"openapi": "3.1.0",
            "info": {"title": "panio controller API", "version": installed,
                     "description": "Jobs for people and CI, with tokens from `panio token add` (docs/ci.md)."},
            "security": [{"bearer": []}],
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}, "schemas": SCHEMAS},
            "paths": PATHS}
