"""Records: what the tool keeps between runs.

The life of an alert across nights (`lifecycle`, a pure state machine) and the evidence that
decides it (`evidence`); the alert store in SQLite (`alert_store`); asv result documents,
read (`results`) and written (`asv_documents`); stage captures as a compile wrote them
(`captures`); and atomic files with the nightly's lock (`files`).
"""
