"""Records: what the tool keeps between runs.

The life of an alert across nights (`lifecycle`, a pure state machine, with the `Evidence`
that decides it; `investigation.evidence`, a floor above, makes that evidence of what an
investigation measured); the alert store in SQLite (`alert_store`); asv result documents,
read (`results`) and written (`asv_documents`); stage captures as a compile wrote them
(`captures`); and atomic files with the nightly's lock (`files`).
"""
