"""Re-measurement planning: which commits, how many samples, within which budget."""

from dataclasses import replace

import numpy as np

from regressions.detection import detect, remeasure
from regressions.detection.environment import EnvironmentAlert
from regressions.groundtruth import synthetic


def series(samples, commits, positions, params="", name="bench.X.time_device",
           deterministic=None):
    return detect.Series(machine="m", env="env", benchmark=name, params=params,
                         commits=tuple(commits), positions=tuple(positions),
                         samples=tuple(None if s is None else tuple(s) for s in samples),
                         higher_is_better=False,
                         deterministic=deterministic)


def history(n):
    return [f"{i:040x}" for i in range(n)]


def strided(levels, stride, n_samples=20, sd=0.015, seed=0, params=""):
    """A series benchmarked at every `stride`-th commit of a history and its newest."""
    marks = list(range(0, len(levels), stride))
    if marks[-1] != len(levels) - 1:
        marks.append(len(levels) - 1)
    rng = np.random.default_rng(seed)
    samples = [(levels[i] * np.exp(rng.normal(0, sd, n_samples))).tolist() for i in marks]
    return series(samples, [history(len(levels))[i] for i in marks], marks, params)


def test_an_edge_candidate_asks_for_its_commit_and_the_stride_window():
    levels = [1.0] * 28 + [1.3]  # the newest commit (28) regressed; benchmarked 0, 3, ... 27
    s = strided(levels, 3)
    found = detect.run_detection([s])
    (candidate,) = [c for c in found.candidates if c.edge == "newest"]
    assert candidate.reported and (candidate.good_position, candidate.bad_position) == (27, 28)
    requests = remeasure.plan(found.candidates, history(29), budget=1000)
    assert [(int(r.commit, 16), r.samples, r.reason) for r in requests] == [(28, 20, "edge")]
    # With a wider stride the window holds commits nobody benchmarked: measure them too.
    wide = strided([1.0] * 30 + [1.3], 5)
    found = detect.run_detection([wide])
    requests = remeasure.plan(found.candidates, history(31), budget=1000)
    assert [int(r.commit, 16) for r in requests] == [30, 29, 28, 27, 26]
    assert {r.reason for r in requests} == {"edge"}


def test_the_stride_window_locates_a_step_the_newest_commit_only_showed():
    levels = [1.0] * 27 + [1.3] * 4  # the step lands at 27; benchmarked 0, 5, ..., 25, 30
    truth = {"": [(27, 0.3)]}
    measure = synthetic.StepRemeasure(truth, seed=1, noise=0.015)
    s = strided(levels, 5)
    before = detect.find_regressions([s])
    assert [(r.good_position, r.bad_position, r.edge) for r in before] == [(25, 30, "newest")]
    after = remeasure.detect_with_remeasurement([s], history(31), measure, budget=200)
    assert [(r.good_position, r.bad_position, r.edge) for r in after.detection.regressions] \
        == [(26, 27, None)]  # now held by four commits: located and no longer provisional
    assert after.spent <= 200


def test_budget_and_priority():
    edge = strided([1.0] * 30 + [1.3], 5, params="(edge)")
    stepped, _ = synthetic.step_series(seed=11, n_commits=31, n_samples=20,
                                       steps=((15, 0.012),))
    weak = series(stepped, history(31), range(31), params="(weak)")
    found = detect.run_detection([edge, weak])
    everything = remeasure.plan(found.candidates, history(31), budget=10_000)
    assert {r.params for r in everything} == {"(edge)", "(weak)"}
    cost = sum(r.samples for r in everything if r.params == "(edge)")
    first = remeasure.plan(found.candidates, history(31), budget=cost)
    assert {r.params for r in first} == {"(edge)"}  # edges first, whole candidates only
    assert remeasure.plan(found.candidates, history(31), budget=cost - 1) != first
    assert sum(r.samples for r in remeasure.plan(found.candidates, history(31),
                                                 budget=cost - 1)) <= cost - 1
    assert remeasure.budget_for(60_000) == 15_000


def test_a_commit_is_never_measured_beyond_its_run_cap():
    s = strided([1.0] * 30 + [1.3], 5)
    full = series([*s.samples[:-1], s.samples[-1] * remeasure.MAX_RUNS], s.commits,
                  s.positions)
    found = detect.run_detection([full])
    requests = remeasure.plan(found.candidates, history(31), budget=10_000)
    assert "0" * 38 + "1e" not in [r.commit for r in requests]  # 30 holds 4 runs already


def test_a_deterministic_series_is_never_measured_again():
    """Not even at the commits of its window nobody benchmarked: its change is exact, and
    bisection finds its commit (a compile-work request would run a callgrind grid)."""
    commits = history(10)
    values = [[1.0], [1.0], [1.0], [2.0], [2.0]]
    s = series(values, [commits[i] for i in (0, 3, 6, 8, 9)], (0, 3, 6, 8, 9),
               name="numerics.E.track_err", deterministic=True)
    found = detect.run_detection([s])
    assert any(c.reported for c in found.candidates)
    assert remeasure.plan(found.candidates, commits, budget=100) == []
    noisy = strided([1.0] * 6 + [1.3] * 4, 3)  # the same window on a clock: measured
    found = detect.run_detection([noisy])
    assert {int(r.commit, 16) for r in remeasure.plan(found.candidates, history(10),
                                                      budget=1000)} >= {4, 5}


def test_the_budget_is_in_seconds_and_a_run_or_setup_is_paid_once_per_commit():
    s = strided([1.0] * 30 + [1.3], 5)  # edge: 30, 29, 28, 27, 26; 20 samples each
    found = detect.run_detection([s])
    free = remeasure.plan(found.candidates, history(31), budget=10_000)
    assert len(free) == 5
    name = s.benchmark
    costs = remeasure.Costs(per_sample={name: 0.5}, per_run=30.0,
                            setup_cache={name: ("key", 100.0)})
    assert costs.added(free, set()) == 5 * (20 * 0.5 + 30 + 100)
    assert costs.added(free + free, set()) == 5 * (40 * 0.5 + 30 + 100)
    assert remeasure.plan(found.candidates, history(31), budget=5 * 140 - 1, costs=costs) == []
    assert remeasure.plan(found.candidates, history(31), budget=5 * 140,
                          costs=costs) == free
    base = costs.of_points([s], s.commits[-2:])
    assert base == 2 * (20 * 0.5 + 30 + 100)
    assert remeasure.budget_for(base) == base / 4


def test_a_wall_clock_round_spends_what_it_took_and_prices_the_start_up_it_showed():
    """asv records no start-up: a round of runs that each took 40 s beyond their prices
    spends the time it took, and the next round prices 40 s more per run, so the night stays
    within its budget in seconds of the clock, not only in estimated ones."""
    s = strided([1.0] * 30 + [1.3] * 12, 5, seed=3)
    name = s.benchmark
    prices = remeasure.Costs(per_sample={name: 0.5}, per_run=10.0, wall_clock=True)
    now = [0.0]
    truth = {"": [(30, 0.3)]}
    step = synthetic.StepRemeasure(truth, seed=1, noise=0.015)

    def measure(requests):
        now[0] += prices.added(requests, set()) + 40.0 * len({r.commit for r in requests})
        return step(requests)

    budget = 600.0
    result = remeasure.detect_with_remeasurement([s], history(42), measure, budget=budget,
                                                 costs=prices, timer=lambda: now[0])
    assert result.requests and result.startup == 40.0
    assert result.spent == now[0] <= budget  # what the clock says, within the budget
    # Nominal prices (the simulations) ignore the clock: the spend is the priced one.
    nominal = remeasure.detect_with_remeasurement([s], history(42), measure, budget=budget,
                                                  costs=replace(prices, wall_clock=False),
                                                  timer=lambda: now[0])
    assert nominal.requests and nominal.startup == 0.0
    assert nominal.spent == sum(remeasure.Costs(per_sample={name: 0.5}, per_run=10.0).added([r],
                                                                                            set())
                                for r in nominal.requests) < now[0] - result.spent


def test_the_nights_own_run_seeds_the_start_up_price():
    """Tonight's `asv run` over two commits took 50 s beyond the prices of what it stored:
    25 s a run is the start-up priced into the first round; prices not of the wall clock
    learn nothing."""
    s = strided([1.0] * 9, 4)  # benchmarked 0, 4, 8
    prices = remeasure.Costs(per_sample={s.benchmark: 0.5}, per_run=10.0, wall_clock=True)
    tonight = remeasure.points([s], s.commits[1:])
    assert [r.commit for r in tonight] == list(s.commits[1:])
    took = prices.added(tonight, set()) + 50.0
    assert prices.learned(tonight, took).startup == 25.0
    assert prices.learned(tonight, took).of_points([s], s.commits[1:]) == took
    assert prices.learned(tonight, 0.0).startup == 0.0  # never below zero
    nominal = remeasure.Costs(per_sample={s.benchmark: 0.5}, per_run=10.0)
    assert nominal.learned(tonight, took) == nominal


def test_append_samples_merges_and_inserts():
    commits = history(6)
    s = series([[1.0, 1.1], [2.0]], [commits[0], commits[4]], (0, 4))
    requests = [remeasure.Request(machine="m", env="env", benchmark="bench.X.time_device",
                                  params="", commit=commits[4], samples=2, reason="edge"),
                remeasure.Request(machine="m", env="env", benchmark="bench.X.time_device",
                                  params="", commit=commits[2], samples=2, reason="edge"),
                remeasure.Request(machine="m", env="env", benchmark="bench.X.time_device",
                                  params="", commit=commits[3], samples=2, reason="edge"),
                remeasure.Request(machine="m", env="env", benchmark="other", params="",
                                  commit=commits[3], samples=2, reason="edge")]
    (merged,) = remeasure.append_samples([s], requests, [[2.1, 2.2], [1.5, 1.6], None,
                                                         [9.0]], commits)
    assert merged.commits == (commits[0], commits[2], commits[3], commits[4])
    assert merged.positions == (0, 2, 3, 4)
    assert merged.samples == ((1.0, 1.1), (1.5, 1.6), None, (2.0, 2.1, 2.2))


def test_the_panel_step_is_located_with_a_quarter_more_samples():
    # Ten series of the 60 x 10 panel with +4% at 37 and +1.5% at 50, and ten unchanged:
    # re-measurement moves the 1.5% step's detections onto it within the budget.
    steps = [series(synthetic.step_series(seed=i)[0], history(60), range(60), f"({i})")
             for i in range(10)]
    flats = [series(synthetic.step_series(seed=100 + i, steps=())[0], history(60), range(60),
                    f"({100 + i})") for i in range(10)]
    run = steps + flats
    truth = {s.params: synthetic.PANEL_STEPS if s in steps else () for s in run}
    base = sum(len(p) for s in run for p in s.samples)
    budget = remeasure.budget_for(base)
    result = remeasure.detect_with_remeasurement(
        run, history(60), synthetic.StepRemeasure(truth, seed=7), budget=budget)
    assert result.spent <= budget
    found = {(r.params, r.bad_position) for r in result.detection.regressions}
    hits = sum(any((s.params, p) in found for p in (49, 50, 51)) for s in steps)
    before = {(r.params, r.bad_position) for r in detect.find_regressions(run)}
    assert hits >= 8 and hits > sum(any((s.params, p) in before for p in (49, 50, 51))
                                    for s in steps)
    assert not any(params in {s.params for s in flats} for params, _ in found)


def test_a_contradicted_change_is_measured_again_at_both_ends():
    levels = [1.0] * 20 + [1.3] * 10
    s = strided(levels, 1)
    found = detect.run_detection([s])
    (candidate,) = [c for c in found.candidates if c.reported]
    assert remeasure.plan(found.candidates, history(30), budget=1000) == []  # sure, exact
    requests = remeasure.plan(found.candidates, history(30), budget=1000,
                              contradicted={candidate.bad_commit})
    assert [(int(r.commit, 16), r.reason) for r in requests] == [(20, "contradicted"),
                                                                 (19, "contradicted")]


def test_a_request_the_machine_cannot_serve_tonight_takes_no_budget():
    """Commits before the machine's newest environment change were measured on other
    hardware: a clock series is not measured there again, and what it would have asked for
    is left to the rest of the plan."""
    clock = strided([1.0] * 30 + [1.3], 5, params="(clock)")
    clock = detect.Series(machine=clock.machine, env=clock.env,
                          benchmark="bench_compile.CompileTotal.time_compile",
                          params=clock.params, commits=clock.commits, positions=clock.positions,
                          samples=clock.samples)
    device = strided([1.0] * 30 + [1.3], 5, seed=1, params="(device)")
    device = detect.Series(machine=device.machine, env=device.env,
                           benchmark="bench_execute.ExecuteDeviceTime.time_device",
                           params=device.params,
                           commits=device.commits, positions=device.positions,
                           samples=device.samples)
    found = detect.run_detection([clock, device])
    both = remeasure.plan(found.candidates, history(31), budget=120)
    assert {r.params for r in both} == {"(clock)"}  # one edge's window fills the budget
    shared = EnvironmentAlert(
        machine="m", env="env", good_commit=history(31)[29], bad_commit=history(31)[30],
        good_position=29, bad_position=30, cause="shared", direction="worse", moved=20,
        measured=24, detected=10, median_ratio=1.2, spread=0.01)
    change = detect.Detection(regressions=[], candidates=[], transients=[],
                              environment=[shared])
    measurable = remeasure.same_hardware(change, history(31))
    assert not any(measurable(r) for r in both if int(r.commit, 16) < 30)
    served = remeasure.plan(found.candidates, history(31), budget=120, measurable=measurable)
    assert {r.params for r in served if int(r.commit, 16) < 30} == {"(device)"}
    assert sum(r.samples for r in served) == 120  # the clock's newest commit and the device


def test_a_small_night_still_affords_its_edge_and_window():
    """Four benchmarked commits at 30 s a build: 25% of the night is one build; the allowance
    of four builds lets the newest commit and its stride window be measured again."""
    s = strided([1.0] * 10 + [1.3], 4)  # benchmarked 0, 4, 8, 10: the edge 10, window 9
    costs = remeasure.Costs(per_sample={s.benchmark: 0.01}, per_run=30.0)
    found = detect.run_detection([s])
    night = costs.of_points([s], s.commits)
    assert remeasure.plan(found.candidates, history(11), remeasure.budget_for(night),
                          costs=costs) == []
    requests = remeasure.plan(found.candidates, history(11),
                              remeasure.budget_for(night, per_run=costs.per_run), costs=costs)
    assert {int(r.commit, 16) for r in requests} == {10, 9}


def test_rounds_that_overrun_their_prices_do_not_carry_the_night_past_its_budget():
    """Every sample takes a fifth longer than priced (per-benchmark overheads asv records
    nowhere): learning a start-up per run does not absorb that, so each round plans against
    what is left divided by the overrun it saw, and the clock's total stays within the
    budget. Without that discount the last round, given all that is left, ends past it
    (408 s of this 400 s budget)."""
    run = [strided([1.0] * 30 + [1.3] * 12, 5, seed=seed, params=f"({seed})")
           for seed in range(6)]
    prices = remeasure.Costs(per_sample={run[0].benchmark: 0.5}, per_run=10.0, wall_clock=True)
    now, rounds = [0.0], []
    step = synthetic.StepRemeasure({s.params: [(30, 0.3)] for s in run}, seed=1, noise=0.015)

    def measure(requests):
        rounds.append(len(requests))
        now[0] += prices.added(requests, set()) + 0.2 * 0.5 * sum(r.samples for r in requests)
        return step(requests)

    budget = 400.0
    result = remeasure.detect_with_remeasurement(run, history(42), measure, budget=budget,
                                                 costs=prices, timer=lambda: now[0])
    assert len(rounds) == 3
    assert now[0] <= result.spent <= budget  # spent: the clock's, or the price where more
    assert result.spent > 0.8 * budget  # and it still spends most of it


def test_a_change_awaiting_more_commits_is_measured_again_or_waited_for():
    # pybamm-bench's TimeSolveSEI at PyBaMM #4020, cut to 5 + 2 commits: the new level too
    # short to confirm. With samples its two commits are measured again, newest first; with
    # one value a commit (asv replaces it) nothing is, and the night waits for commits.
    values = [0.41879, 0.42196, 0.41795, 0.42263, 0.42152, 0.5395, 0.53717]
    commits = history(7)
    kept = series([[v] for v in values], commits, range(7), name="suite.TimeSEI.time_solve")
    for keeps, wanted in ((True, [commits[6], commits[5]]), (False, [])):
        s = replace(kept, keeps_samples=keeps)
        found = detect.run_detection([s])
        (candidate,) = [c for c in found.candidates if c.awaiting]
        assert remeasure.classify(candidate, remeasure._History(commits)) == "awaiting"
        requests = remeasure.plan(found.candidates, commits, budget=100)
        assert [r.commit for r in requests if r.reason == "awaiting"] == wanted
