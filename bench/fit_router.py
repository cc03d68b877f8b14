"""Fit the hybrid's complexity router (eq. 13) on evaluate.py's per-program results.

    python bench/fit_router.py EVAL_PROGRAMS.npz [--success 0.9]

Label: the neural path produced a correct candidate within k samples (c > 0). Half of the
programs (even indices) train the logistic classifier, the other half measure it (ROC,
AUC, accuracy); the threshold is chosen on the training half for the stated success rate
among routed programs. Writes jaxcc/neural/weights/router.json and docs/router_roc.png.
"""

import argparse
import json

import numpy as np

from jaxcc.neural import router


def main():
    p = argparse.ArgumentParser()
    p.add_argument("npz")
    p.add_argument("--success", type=float, default=0.9)
    ns = p.parse_args()
    z = np.load(ns.npz)
    x, y = z["features"], z["correct"] > 0
    tr, te = np.arange(len(y)) % 2 == 0, np.arange(len(y)) % 2 == 1
    params = router.fit(x[tr], y[tr])
    s_tr = np.asarray(router.score(params, x[tr]))
    s_te = np.asarray(router.score(params, x[te]))
    thr = router.choose_threshold(s_tr, y[tr], ns.success)
    routed = s_te >= thr
    stats = {
        "programs_train": int(tr.sum()), "programs_test": int(te.sum()),
        "auc_test": router.auc(s_te, y[te]),
        "accuracy_test_at_0.5": float(((s_te >= 0.5) == y[te]).mean()),
        "base_rate_test": float(y[te].mean()), "threshold": thr, "target_success": ns.success,
        "p_simple_test": float(routed.mean()),
        "success_among_routed_test": float(y[te][routed].mean()) if routed.any() else None,
    }  # fmt: skip
    router.save(params, thr, {"fit": stats, "source": ns.npz})
    print(json.dumps(stats, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fpr, tpr, _ = router.roc(s_te, y[te])
    plt.figure(figsize=(4, 4))
    plt.plot(fpr, tpr, label=f"router (AUC {stats['auc_test']:.2f})")
    plt.plot([0, 1], [0, 1], "--", color="gray", label="chance")
    plt.xlabel("false positive rate")
    plt.ylabel("true positive rate")
    plt.title("eq. 13 router, held-out programs")
    plt.legend()
    plt.tight_layout()
    plt.savefig("docs/router_roc.png", dpi=110)


if __name__ == "__main__":
    main()
