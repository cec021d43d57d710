"""Bench jobs on the controller side: job files, where jobs run, reports for people and CI.

``spec``     parse and validate job files, check steps against the CLI, build payloads;
``local``    the embedded default: run a job in this process (no broker, no server);
``report``   summaries, JUnit XML and the CI exit status of a finished job.
The runner itself lives host-side in ``bench_agent.jobs`` (workers run it too).
"""
