"""Ground truth: histories and data whose answers are known, for tests, scripts and the demo.

Never on the production path (the architecture test checks who imports it): the detector's
step panel and synthetic asv stores (`synthetic`), regressions injected as source edits
(`scenarios`) into scratch git histories (`scratch`), synthetic commit histories for the
bisector (`bisection_histories`), and a month of nightlies on a busy branch - its generator
(`month`), what is planted where (`planted`) and the simulation that runs the nightly's own
night on it and scores it (`simulation`).
"""
