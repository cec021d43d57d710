"""A scripted judge command: prompt on stdin, a prose-wrapped verdict on stdout.

It looks for the scenario's GOAL line and answers with the scores in
$FAKE_JUDGE_SCORES (JSON) and the trap verdicts in $FAKE_JUDGE_TRAPS (a JSON list)
wrapped in prose with stray braces, or with no JSON
at all when the transcript contains FAKE_JUDGE_GARBAGE.
"""

import json
import os
import sys

prompt = sys.stdin.read()
assert "COMMAND REFERENCE:" in prompt and "panio power set" in prompt, "judge prompt lacks the help tree"
assert "CHECKER VERDICT: (a deterministic checker" in prompt and "verdict: " in prompt, "judge prompt lacks the checker's verdict"
if "FAKE_JUDGE_GARBAGE" in prompt:
    print("I cannot decide. PowerCycle { target } is weird.")
    sys.exit(0)
scores = json.loads(os.environ.get("FAKE_JUDGE_SCORES", '{"d1": 2, "d2": 2, "d3": 2, "d4": 2, "d5": 2, "d6": 2, "d7": 2}'))
print("Reasoning: the agent ran `PowerCycle { target }`-like things {sic}.")
print("Draft: " + json.dumps({k: 0 for k in scores}))
print("Final verdict:\n```json\n" + json.dumps({**scores, "justifications": {"d2": "quoted"},
      "traps_eval": json.loads(os.environ.get("FAKE_JUDGE_TRAPS", "null"))
      or [{"id": "configure-writes-nothing", "respected": True, "evidence": "said so"}],
      "hard_fail": False, "pass": True}) + "\n```")
