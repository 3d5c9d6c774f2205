"""The audit: the workbook's checks run on a reader's own files (`python -m labkit audit`).

`log` audits part one's property on a message log and its checkpoints, `catalog` part two's on
a catalog event log; `loop` plays a reader's own loop through Article 2's fixture and every
arrival order; `inputs` reads the files, `findings` renders what was found, and
`labkit.plots.audit` draws each audit.
"""
