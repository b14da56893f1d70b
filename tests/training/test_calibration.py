"""Temperature and Platt scaling, ECE and the reliability diagram (ares_rerank.calibration)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from ares_rerank.calibration import (
    CALIBRATION_FILE,
    calibrate,
    entailment_probs_from_logits,
    expected_calibration_error,
    fit_platt,
    fit_temperature,
    negative_log_likelihood,
    read_calibration,
    reliability_bins,
    reliability_diagram,
    write_calibration,
)


def _overconfident(n: int = 4000, scale: float = 4.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Labels drawn from sigmoid(z); the head reports scale * z (over-confident by ``scale``)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.0, size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-z))).astype(int)
    return np.stack([np.zeros(n), scale * z], axis=1), y


def test_fit_temperature_recovers_the_overconfidence_factor():
    logits, labels = _overconfident(scale=4.0)
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(4.0, rel=0.1)
    # The fitted temperature is the NLL minimum: nearby temperatures are worse.
    nll = negative_log_likelihood(logits, labels, t)
    assert nll < negative_log_likelihood(logits, labels, 0.8 * t)
    assert nll < negative_log_likelihood(logits, labels, 1.25 * t)


def test_binary_logodds_equal_two_column_logits():
    logits, labels = _overconfident(n=500)
    assert fit_temperature(logits[:, 1], labels) == pytest.approx(fit_temperature(logits, labels), rel=1e-6)


def test_calibrate_lowers_ece_and_nll_and_keeps_accuracy():
    logits, labels = _overconfident(scale=5.0, seed=1)
    report = calibrate(logits, labels)
    assert report.ece_after < report.ece_before / 3
    assert report.nll_after < report.nll_before
    assert report.accuracy == pytest.approx(float((logits.argmax(1) == labels).mean()))
    assert report.num_pairs == len(labels)
    fixed = calibrate(logits, labels, temperature=1.0)
    assert fixed.temperature == 1.0 and fixed.ece_after == pytest.approx(fixed.ece_before)


def _shifted(n: int = 6000, scale: float = 2.0, shift: float = 1.5, seed: int = 3):
    """Labels drawn from sigmoid(z - shift); the head reports scale * z: over-confident and biased to 'entailed'."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.5, size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(z - shift)))).astype(int)
    return np.stack([np.zeros(n), scale * z], axis=1), y


def test_fit_platt_recovers_scale_and_bias_and_beats_temperature():
    logits, labels = _shifted()
    t, b = fit_platt(logits, labels)
    assert t == pytest.approx(2.0, rel=0.1) and b == pytest.approx(-1.5, abs=0.2)
    nll = negative_log_likelihood(logits, labels, t, b)
    for dt, db in ((1.1, 0), (0.9, 0), (1, 0.2), (1, -0.2)):  # a minimum: every neighbour is worse
        assert nll < negative_log_likelihood(logits, labels, t * dt, b + db)
    platt = calibrate(logits, labels, method="platt")
    temperature = calibrate(logits, labels)
    assert (platt.temperature, platt.bias, platt.method) == pytest.approx((t, b, "platt"))
    assert temperature.bias == 0.0 and temperature.method == "temperature"
    assert platt.ece_after < temperature.ece_after / 2 and platt.nll_after < temperature.nll_after
    # the bias moved decisions, and accuracy_after counts them; the temperature never does
    assert temperature.accuracy_after == pytest.approx(temperature.accuracy)
    assert platt.accuracy_after != pytest.approx(platt.accuracy)


def test_platt_binary_logodds_equal_two_column_logits_and_three_way_uses_the_positive_index():
    logits, labels = _shifted(n=1500)
    assert fit_platt(logits[:, 1], labels) == pytest.approx(fit_platt(logits, labels), rel=1e-6)
    # class 0 entailed in a 3-way head: the bias goes to column 0
    three = np.stack([logits[:, 1], np.zeros(len(labels)), np.full(len(labels), -30.0)], axis=1)
    t, b = fit_platt(three, 1 - labels, positive_index=0)
    assert (t, b) == pytest.approx(fit_platt(logits, labels), rel=1e-3, abs=1e-3)
    probs = entailment_probs_from_logits(three, 0, t, b)
    np.testing.assert_allclose(probs, 1 / (1 + np.exp(-(logits[:, 1] / t + b))), atol=1e-5)


def test_platt_on_separable_pairs_stays_finite_and_evaluating_needs_a_temperature():
    logits = np.array([[0.0, 3.0], [0.0, 2.0], [0.0, -2.0], [0.0, -3.0]])
    t, b = fit_platt(logits, [1, 1, 0, 0])
    assert np.isfinite(t) and np.isfinite(b) and t >= 0.05
    with pytest.raises(ValueError, match="method='isotonic'"):
        calibrate(logits, [1, 1, 0, 0], method="isotonic")
    with pytest.raises(ValueError, match="pass temperature="):
        calibrate(logits, [1, 1, 0, 0], bias=0.5)
    with pytest.raises(ValueError, match="bias="):
        entailment_probs_from_logits(logits, 1, 1.0, float("nan"))


def test_three_way_logits_use_the_positive_index():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(300, 3)) * 3
    labels = rng.integers(0, 3, size=300)
    probs = entailment_probs_from_logits(logits, positive_index=2, temperature=2.0)
    expected = np.exp(logits[:, 2] / 2) / np.exp(logits / 2).sum(1)
    np.testing.assert_allclose(probs, expected, rtol=1e-10)
    with pytest.warns(RuntimeWarning, match="hardly better than by chance"):  # random logits: soften, to the limit
        assert calibrate(logits, labels, positive_index=2).temperature > 1.0


def test_ece_matches_a_hand_computed_example():
    probs = np.array([0.05, 0.1, 0.9, 0.95, 0.6])
    labels = np.array([0, 0, 1, 0, 1])
    # 5 bins: [0, .2] holds .05, .1 (mean .075, share 0); (.4, .6] holds .6 (share 1); (.8, 1] holds .9, .95 (share .5)
    expected = (2 * 0.075 + 1 * 0.4 + 2 * abs(0.925 - 0.5)) / 5
    assert expected_calibration_error(probs, labels, n_bins=5) == pytest.approx(expected)
    bins = reliability_bins(probs, labels, n_bins=5)
    assert bins["count"].tolist() == [2, 0, 1, 0, 2]


def test_perfectly_separated_data_hits_the_lower_bound_not_zero():
    logits = np.array([[0.0, 3.0], [0.0, -3.0]] * 10)
    labels = np.array([1, 0] * 10)
    assert fit_temperature(logits, labels) == pytest.approx(0.05, rel=1e-3)


def test_a_fit_clamped_at_its_limit_warns_and_an_inner_one_does_not():
    logits = np.array([[0.0, 3.0], [0.0, -3.0]] * 10)
    labels = np.array([1, 0] * 10)
    with pytest.warns(RuntimeWarning, match=r"fitted temperature 0\.05 is clamped at the limit of its search "
                                            r"\(temperature in \[0\.05, 20\.0\], bias in \+-20\.0\): the 20 pairs "
                                            r"have no finite optimum"):
        report = calibrate(logits, labels)
    assert report.temperature == pytest.approx(0.05, rel=1e-3)
    noisy = np.array([[0.0, 2.0], [0.0, 1.0], [0.0, -1.0], [0.0, -2.0], [0.0, 1.5], [0.0, -1.5]])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an inner optimum: no warning
        inner = calibrate(noisy, [1, 0, 1, 0, 1, 0])
        calibrate(logits, labels, temperature=0.05)  # evaluating a given temperature fits nothing
    assert 0.05 < inner.temperature < 20.0


def test_a_temperature_fit_keeps_a_given_bias_and_fits_around_it():
    rng = np.random.default_rng(0)
    z = rng.normal(0, 3, size=(400, 2))
    y = (rng.random(400) < 1 / (1 + np.exp(-(z[:, 1] - z[:, 0]) / 2.0 + 1.0))).astype(int)
    report = calibrate(z, y, fixed_bias=-1.0)
    assert report.bias == -1.0
    assert report.temperature == pytest.approx(fit_temperature(z, y, bias=-1.0))
    assert abs(report.temperature - fit_temperature(z, y)) > 1e-3  # the bias changes the fit


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="labels has shape"):
        fit_temperature(np.zeros((3, 2)), [0, 1])
    with pytest.raises(ValueError, match="class indices"):
        fit_temperature(np.zeros((2, 2)), [0, 2])
    with pytest.raises(ValueError, match="NaN"):
        fit_temperature(np.array([[0.0, np.nan]]), [1])
    with pytest.raises(ValueError, match="probs must lie"):
        expected_calibration_error([1.5], [1])
    with pytest.raises(ValueError, match="temperature"):
        write_calibration("/tmp", {"temperature": -1})
    # 1e11 bins asked for 745 GiB; a fit on pairs of one kind ran the temperature to its bound and was saved
    with pytest.raises(ValueError, match=r"n_bins=99999999999 must be an integer in \[1, 1000\]"):
        expected_calibration_error([0.5], [1], n_bins=99999999999)
    with pytest.raises(ValueError, match="all 3 held-out pairs are entailed: a fit needs pairs of both kinds"):
        calibrate(np.zeros((3, 2)), [1, 1, 1])
    assert calibrate(np.zeros((3, 2)), [1, 1, 1], temperature=1.0).ece_after == pytest.approx(0.5)  # evaluating is fine


@pytest.mark.parametrize("row, match", [
    ({"premises": "I have A", "hypothesis": "I have A", "label": 1}, "premises='I have A' must be a list of strings"),
    ({"premises": ["I have A"], "hypothesis": None, "label": 1}, "hypothesis=None must be a non-empty string"),
    ({"premises": ["I have A"], "hypothesis": "I have A", "label": 7}, "label=7 must be 1 (entailed) or 0"),
    ({"premises": ["I have A"], "hypothesis": "I have A", "label": "yes"}, "label='yes' must be 1"),
    ({"premises": ["I have A"], "hypothesis": "I have A", "class": -1}, "class=-1 must be a class index"),
])
def test_calibrate_pairs_of_the_wrong_form_name_file_line_and_field(tmp_path, row, match):
    """A string ``premises`` was read as one premise per character, a null hypothesis scored as "None" and a label
    such as 7 counted as "not entailed": each silently changed the fitted temperature. ``"yes"`` ended in int()'s
    bare "invalid literal" message."""
    from ares_rerank.commands.calibrate import read_pairs

    pairs = tmp_path / "pairs.jsonl"
    ok = {"premise": "I have A", "hypothesis": "I have A", "label": 1.0}
    pairs.write_text(json.dumps(ok) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=f"pairs.jsonl:2 {re.escape(match)}"):
        read_pairs(str(pairs))
    pairs.write_text(json.dumps(ok) + "\n")
    assert read_pairs(str(pairs))[0]["premises"] == ["I have A"]


def test_reliability_diagram_writes_a_png(tmp_path):
    logits, labels = _overconfident(n=300)
    report = calibrate(logits, labels)
    path = reliability_diagram(
        entailment_probs_from_logits(logits), labels, tmp_path / "plots" / "rel.png",
        probs_after=entailment_probs_from_logits(logits, temperature=report.temperature),
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_full_disk_while_writing_the_plot_names_the_file(tmp_path):
    """``calibrate --plot`` on a full disk said only "File too large." (EFBIG here, through a file-size limit)."""
    import resource
    import signal
    import subprocess
    import sys

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    plot = tmp_path / "rel.png"
    code = ("import numpy as np\nfrom ares_rerank.calibration import reliability_diagram\n"
            "from ares_rerank.cli import describe_error\n"
            f"try:\n    reliability_diagram(np.linspace(0, 1, 50), np.arange(50) % 2, {str(plot)!r})\n"
            "except OSError as err:\n    print(describe_error(err))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)
    assert done.stdout.startswith("File too large") and done.stdout.rstrip().endswith(f": {plot}."), done
    assert not plot.exists() and not list(tmp_path.iterdir())  # no torn plot, no temporary file


def test_write_calibration_merges_and_reads_back(tmp_path):
    write_calibration(tmp_path, {"temperature": 2.0, "label": "entailment"})
    write_calibration(tmp_path, {"temperature": 1.5, "ece_after": 0.01})
    data = json.loads((tmp_path / CALIBRATION_FILE).read_text())
    assert data == {"temperature": 1.5, "label": "entailment", "ece_after": 0.01}
    assert read_calibration(tmp_path) == data
    assert read_calibration(tmp_path / "missing") == {}


def test_calibrate_command_fits_writes_and_the_loader_applies_the_temperature(tmp_path, tiny_nli_path):
    import shutil

    from ares_rerank.backbones.loading import load_backbone
    from ares_rerank.cli import main
    from ares_rerank.data import load_claimtrees

    folder = shutil.copytree(tiny_nli_path, tmp_path / "head")
    chains = load_claimtrees(4, 5)
    rows = [{"premises": list(c.base_claims), "hypothesis": s, "label": 1 - y}
            for c in chains for s, y in zip(c.steps, c.labels)]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    assert main(["calibrate", str(folder), "--pairs", str(pairs), "--evaluate-only"]) == 0
    assert not (folder / CALIBRATION_FILE).exists()  # evaluate-only writes nothing
    # a plot format matplotlib cannot write failed after the head was loaded and fitted, naming no flag
    assert main(["calibrate", str(folder), "--pairs", str(pairs), "--plot", str(tmp_path / "rel.txt")]) == 2
    assert not (folder / CALIBRATION_FILE).exists() and not (tmp_path / "rel.txt").exists()
    assert main(["calibrate", str(folder), "--pairs", str(pairs), "--evaluate-only", "--plot",
                 str(tmp_path / "rel.svg")]) == 0
    assert (tmp_path / "rel.svg").read_text().lstrip().startswith("<?xml")
    assert main(["calibrate", str(folder), "--pairs", str(pairs), "--plot", str(tmp_path / "rel.png")]) == 0
    saved = read_calibration(folder)
    head = load_backbone(folder, kind="nli", device="cpu")
    premises, hypotheses = [r["premises"] for r in rows], [r["hypothesis"] for r in rows]
    logits = head.logits(premises, hypotheses)
    assert saved["temperature"] == pytest.approx(fit_temperature(logits, [r["label"] for r in rows]))
    assert head.temperature == pytest.approx(saved["temperature"])
    np.testing.assert_allclose(head.entailment_probs(premises, hypotheses),
                               entailment_probs_from_logits(logits, 1, saved["temperature"]), atol=1e-6)
    assert (tmp_path / "rel.png").is_file()
    assert saved["bias"] == 0.0

    # --method platt writes a bias too; the loader applies both
    assert main(["calibrate", str(folder), "--pairs", str(pairs), "--method", "platt"]) == 0
    saved = read_calibration(folder)
    t, b = fit_platt(logits, [r["label"] for r in rows])
    assert (saved["temperature"], saved["bias"]) == pytest.approx((t, b), rel=1e-6, abs=1e-9) and b != 0.0
    head = load_backbone(folder, kind="nli", device="cpu")
    assert (head.temperature, head.bias) == pytest.approx((t, b))
    np.testing.assert_allclose(head.entailment_probs(premises, hypotheses),
                               entailment_probs_from_logits(logits, 1, t, b), atol=1e-6)
    assert load_backbone(folder, kind="nli", device="cpu", temperature=1.0).bias == 0.0  # an explicit temperature
    # a later temperature fit keeps the Platt bias it does not refit, and fits the temperature with it in place
    assert main(["calibrate", str(folder), "--pairs", str(pairs)]) == 0
    kept = read_calibration(folder)
    assert kept["bias"] == pytest.approx(b)
    assert kept["temperature"] == pytest.approx(fit_temperature(logits, [r["label"] for r in rows], bias=b))


def test_calibrate_config_rebuilds_the_training_split_with_its_minimal_pairs(tmp_path):
    """``--config`` measures a head on the pairs training held out: the config's selection and pair kinds."""
    from ares_rerank.commands.calibrate import config_pairs
    from ares_rerank.training import parse_args, split_rows

    config = tmp_path / "mix.yaml"
    config.write_text("num_chains: 24\nval_fraction: 0.25\ntest_fraction: 0.25\nminimal_pairs: true\n"
                      "premise_selection: relevant:6\ntemplates: [paper]\ncomposed_share: 0.0\n"
                      "distractor_share: 0.0\nrecipe_share: 0.0\noutput_dir: " + str(tmp_path / "run") + "\n")
    rows = config_pairs(str(config), "test")
    mix, _ = parse_args([str(config)])
    part, expected = split_rows(mix)["test"]
    assert rows == expected and {c.id for c in part} == {r["chain_id"] for r in rows}
    assert {"sound_prefix", "minimal"} <= {r["kind"] for r in rows}
    assert all(r["label"] == 0 for r in rows if r["kind"] == "minimal")
