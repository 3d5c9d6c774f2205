"""What each notebook must show after a run, checked the same way whichever runner ran it: a
headless kernel (tests/test_notebooks.py) or Run All in JupyterLab (tests/browser/
test_notebook_results.py, for the notebooks the browser tests run anyway)."""

from __future__ import annotations

import re
from typing import Any

from harness.nbrun import cell_errors, cell_text

# What each notebook states as its result, as it appears in the outputs of a run (regexes).
SHOWS = {
    # two figures; the final cell must draw one (checked below); Bug 1's carries its alt text
    "00_start_here": [
        r"MAX\(delivered\) line jumps to 5 while ids 1, 2 and 4 are open",
    ],
    "01_max_is_not_a_watermark": [
        r"MAX\(delivered\): +5\ngap-free frontier: +0\n",
        r"max: claims \[1, 5\], holds ids \[3, 5\]\nfrontier: no summary",
        r"orphans under max: +\[1, 2, 4\]\norphans under frontier: \[\]",
        r"orphans under MAX: ids 1, 2, 4; under the frontier: none",  # the timeline's alt text
        r"orphan_ids_max +\(1, 2\)",
    ],
    "02_gap_free_frontier": [
        r"refusing 'failed' -> 'delivered'",
        r"the model agrees with SQLite on all n! orders for n <= 5",
        r"max: \[\(1, 5, \[3, 5\]\), \(6, 6, \[6\]\)\] chain problems: none",
        r"5 of 6 \(83%\) at n = 3 and 40,319 of 40,320 orders at n = 8; the frontier 0%",
    ],
    "03_triggers_shards_indexes": [
        r"SEARCH conversations USING COVERING INDEX idx_conv_active",
        # Article 1's scale check: still a SEARCH on the partial index at 50,000 settled rows
        r"50,000 settled rows \+ 2 open, one shard:\n +SCAN CONSTANT ROW\n +SCALAR SUBQUERY 1\n"
        r" +SEARCH conversations USING COVERING INDEX idx_conv_active",
        r"VM steps per lookup: \d{1,3} with idx_conv_active, \d{3},\d{3} without it",
        # the partial index stays at one page while 50,000 rows settle
        r"\n50000 +2 +\d{3,} +1 +\d{3,}",
        # K = 8 workers: the per-shard steps are the same for 20, 100 and 400 shards
        r"\n8(?: +\d+){3} +(\d+) +\1 +\1\n",
    ],
    "04_late_tick_rewinds": [
        r"refused: UNIQUE constraint failed: catalog_versions.version",
        r"window of 1 in-flight ballot\(s\) is full",
        r"1:unknown_ballot → v2",  # the story on run_schedule: ballot 1 lands late, head stays 2
        r"now late +stale_watermark",  # a fenced-out ballot is refused when its answer arrives
        r"pass +FAIL +stale_base",  # each check alone lets one wrong response through
        r"FAIL +pass +stale_watermark",
        # the workbench on Article 2's late tick: callback falls, ballot does not
        r"'callback': 'BROKEN: reader saw v2 → v1 at step 4'",
        r"'ballot': 'safe on this schedule: the head never fell'",
    ],
    "05_five_designs": [
        # over eight random seeds: no rewinds for the three guarded designs
        r"\nsingle ballot +0 +[\d.]+ +[\d.]+ +[\d.]+\nhedged ballots +0 +[\d.]+ +[\d.]+ +[\d.]+"
        r"\ncompare-and-set +0 +[\d.]+",
        r"throughput \(kept commits per time unit\)",
        # CAS commits the answer the loop abandoned; the ballot refuses it
        r"\n6 +timeout ; deliver 1 ; deliver 2 +timeout 1 1:commit 2:cas_conflict",
        r"\n7 +timeout ; deliver 1 ; deliver 2 +timeout 1 1:unknown_ballot 2:commit",
        # shortest counterexample per design over every order of 4 deliveries
        r"callback: deliver 1 ; deliver 2 ; deliver 1\n +lww: timeout ; deliver 2 ; deliver 3 ; "
        r"deliver 1\n +ballot: no order of 4 deliveries breaks it",
        # the workbench's "shortest break" button for lww
        r"timeout; deliver 2; deliver 3; deliver 1 -> BROKEN: reader saw v2 → v1 at step 4",
        # single ballot and CAS: equal throughput on average over seeds 0-7, not at seed 0
        r"throughput, single ballot and compare-and-set: at random seed 0 (\d\.\d\d) and "
        r"(?!\1)\d\.\d\d; mean over random seeds 0 to 7 (\d\.\d\d) and \2\n",
        r"latency p95, single ballot and compare-and-set: at random seed 0 [\d.]+ and [\d.]+; "
        r"mean over random seeds 0 to 7 [\d.]+ and [\d.]+\n",
    ],
    "05b_pipelined_ballots": [
        # pipelined ballots: at W = 4 at least 2.5x the single ballot's kept versions per unit
        r"W = 4: pipelined ballots keep [\d.]+ versions per time unit, (?:2\.[5-9]|[3-9]\.\d)x "
        r"the single ballot",
        # throughput grows with W, less than in proportion
        r"pipelined ballots against W = 1: [\d.]+x at W = 2, [\d.]+x at W = 4, [\d.]+x at W = 8 "
        r"\| less than W each time: True",
        # without the hash check the stale answer commits and v2 loses v1's tool
        r"read v0, claims v1, no hash check: ballot 2: commit → head v2; .*"
        r"v1's tool kept at v2: False",
        # the base-hash check is real: the honest held answer commits, the stale one is refused
        r"honest: request 2 \(fence 1\) lands first: held, stored in the hold: ballots \[2\]",
        r"held answer of request 2: commit \| head v2 \| replays \(request, of ballot\): \[\]",
        r"held answer of request 2: refused base_hash_mismatch \| head v1 \| replays "
        r"\(request, of ballot\): \[\(4, 2\), \(5, 3\)\]",
        # the hold's frontier and part one's, computed apart, agree before and after fence 1
        r"fence 1 waiting: the head may reach v1; part one's frontier: row 1\n"
        r"fence 1 answered: the head may reach v4; part one's frontier: row 4\n",
        # the flush: giving up on 1 replays 1, 2 and 3; 1's late answer is refused
        r"ticks replayed: 3\n",
        r"timeout 1 +timeout 1 +0\n.*deliver 1 +1:unknown_ballot +0\n",
        r"falls the reader saw over all 21 runs: 0; versions kept per run: \[20\]",
        # seed 0: one lost tick costs the single ballot one replay, the pipeline (W = 4) four
        r"single ballot -> pipelined: inverted 1 -> 4, stall 1 -> 4, stale_body 1 -> 4\n",
        r"lowest over the fault classes here: (?:2\.[1-9]|[3-9]\.\d)x",
        # the widget's first table: the flush costs four replays against one
        r"pipelined ballots against the single ballot, throughput [\d.]+ against [\d.]+; "
        r"ticks replayed 4 against 1; answers refused 1 against \d+; latency p95 [\d.]+ against "
        r"[\d.]+",
        r"n = 6: [\d,]+ orders, 0 rewind, shortest counterexample: None",
    ],
    "06_crashes_and_restarts": [
        r"killed outright by the OS: True",
        r"after the restart: head version 3, log verified up to version 3",
        r"reserved_at, decided_at",  # the on-disk overview lists every column, none cut
        r"RewindError: catalog rewound",
        r"final_head",
        # the simulated crash: callback falls twice and ends at 18; the ballot designs reach 20
        r"\nwrite in callback +1 +\d+ +2 +18 +20\n",
        r"\nsingle ballot +1 +20 +0 +20 +20\n",
        r"\nhedged ballots +1 +20 +0 +20 +20\b",
        # pipelined ballots killed at every fifth statement, then once for real with answers held
        r"kills after which the restart found answers held: [1-9]",
        r"reader falls across \d+ kills: 0\n",
        r"every run ends at version 6 with an empty hold: True",
        r"killed outright at statement \d+: True; held answers the restart found: [1-9]",
    ],
    # Part three needs a server (the embedded one in CI); the late id is orphaned by the no-wait
    # frontier and never by the xmin horizon wait, in the scripted run and under real concurrency.
    "07_postgres_commit_order": [
        r"orphans under the no-wait frontier: \[1\] \| under the horizon wait: \[\]",
        r"A still open  frontier 0  settled False",
        r"xmin horizon wait +\d+ rows,  0 orphans",
        r"horizon +\d+ rows, 0 orphans",
        r"lock +\d+ rows, 0 orphans",
        r"the horizon wait commits faster than the lock: True",
    ],
    # The naive check-then-write loses A's answer without an error; the ballot refuses B; eight
    # workers keep every promise (server needed, as for 07).
    "08_ballots_across_machines": [
        r"naive +B +write version 6, commit +1 row updated, no error",
        r"catalog after the naive run: version 6, answer of B \(1 answer lost\)",
        r"ballot +B +apply ballot \d+ +refused: stale_watermark",
        r"catalog after the ballot run: version 6, answer of A\n",
        r"versions 0\.\.60, each based on the one before: yes",
        r"most commits on one watermark: 1\n",
        r"accepted responses 60, versions 60, commits the workers saw 60",
        r"rewinds seen by the reader: 0",
        r"every refusal: stale_watermark: True",
        r"\d+ guarded writes found the store changed since their read, wrote nothing",
        r"\d+ answers tried their commit before reading and were refused by the database",
        # the primary key refused the commit of every refused answer before any read
        r"refusals whose commit the database refused first: (\d+) of \1\n",
        r"AND observed_watermark = %s RETURNING 1\),\nversion AS \(INSERT INTO catalog_versions",
    ],
    # The live service with every fault on: the unguarded designs fall, for the loop and for
    # the reader process; the guarded ones never, and the ballot logs read back chained. The
    # killed loop loses nothing; the live simulator-vs-real table agrees on the falls.
    "09_a_real_planner": [
        r"\nwrite in callback +\d+ +[1-9]\d* +[1-9]\d* +\d+\b",
        r"\nlast-write-wins +\d+ +[1-9]\d* +[1-9]\d* +\d+\b",
        r"\nsingle ballot +20 +0 +0 +[1-9]\d*\b",
        r"\nhedged ballots +20 +0 +0 +[1-9]\d*\b",
        r"\ncompare-and-set +20 +0 +0 +[1-9]\d*\b",
        # the stores read back (wrapped or not): logs chained, cas's row only climbed, others fell
        r"\nwrite in callback +(\d+ +){0,4}row at v20; fell [1-9]\d* times?",
        r"\nlast-write-wins +(\d+ +){0,4}row at v20; fell [1-9]\d* times?",
        r"\nsingle ballot +(\d+ +){0,4}1\.\.20 chained",
        r"\nhedged ballots +(\d+ +){0,4}1\.\.20 chained",
        r"\ncompare-and-set +(\d+ +){0,4}row at v20; (steps of 1|climbs only)",
        r"single ballot: none +\([\d,]+ polls in about [\d.]+ s: one every [\d.]+ ms\)",
        r"killed outright by the OS: True",
        r"ballots in flight in the store when it died: \[\d+(, \d+)*\]",
        # every owed ballot has a fate in the store and a line of what the restart saw
        r"ballot +status +reason +the restarted loop saw",
        r"log 1\.\.8 chained, reported commits lost: 0, falls the reader process saw: 0",
        r"throughput real/sim",
        r"falls of the guarded designs \([^)]*\), simulated and real: 0 0",
        r"falls of the unguarded designs \([^)]*\), simulated and real: [1-9]\d* \d+",
        r"Finished callback: \d+ versions kept of \d+ commits; the reader process saw [1-9]",
    ],
    "10_audit_your_own_system": [
        r"audit log: 6 orphan \(status_rows 16, checkpoints 2, rule max",
        r"audit log: no finding \(status_rows 16, checkpoints 7, rule frontier",
        r"--- callback: exit 1\nfall: observer r1 read head 1 at 14 after 2 at 11 "
        r"\(fall 1 of 1, in 4 reads\)",
        r"double_commit: version 1 committed twice: by ballot call2 at 5 and by ballot call1 at 13",
        r"--- ballot: exit 0\naudit catalog: no finding",
        r"fall: __main__:SketchLoop: the head falls from 2 to 1 at step 4 of "
        r"'timeout; deliver 2; deliver 3; deliver 1'",
        r"Article 2's fixture: holds \['timeout 1', '2:commit', '1:commit'\]",
        r"\naudit loop: no finding \(fixture holds, orders \d+, rewinding 0\)",
        r"SketchLoop: on the service [1-9]\d* falls in [\d,]+ reads of the reader process, "
        r"head v20",
        r"CarefulLoop: on the service 0 falls in [\d,]+ reads of the reader process, head v20",
        r"same findings as the CSV files: True",
    ],
}


def check_shows_its_result(stem: str, nb: Any) -> None:
    """Fail unless executed notebook `nb` (nbformat) raised nowhere, its final code cell shows
    something (00's a picture), and its outputs match every pattern of SHOWS[stem]."""
    assert cell_errors(nb) == [], f"{stem}: cells raised"
    code = [c for c in nb.cells if c.cell_type == "code"]
    final = code[-1].outputs
    assert final, f"{stem}: the final cell shows nothing"
    if stem == "00_start_here":
        assert any("image/png" in out.get("data", {}) for out in final)
    text = "\n".join(cell_text(c) for c in code)
    missing = [rule for rule in SHOWS[stem] if not re.search(rule, text)]
    assert not missing, f"{stem}: outputs do not show {missing}"
