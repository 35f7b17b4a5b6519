"""Runs inside lm-evaluation-harness's own virtual environment (it cannot import holistic_dagster):
loads the model with lm-eval's HFLM and scores the given (context, continuation) pairs.

usage: python _lm_eval_worker.py MODEL_DIR REQUESTS.json RESULTS.json BATCH_SIZE
"""

import json
import sys
import time

started = time.perf_counter()
from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.models.huggingface import HFLM  # noqa: E402

model_dir, requests_file, results_file, batch_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pairs = json.load(open(requests_file))
lm = HFLM(pretrained=model_dir, batch_size=batch_size, device="cpu", dtype="float32")
loaded = time.perf_counter()
instances = [
    Instance(request_type="loglikelihood", doc={}, arguments=(ctx, cont), idx=i) for i, (ctx, cont) in enumerate(pairs)
]
results = lm.loglikelihood(instances, disable_tqdm=True)
scored = time.perf_counter()
json.dump(
    {
        "loglikelihoods": [float(r[0]) for r in results],
        "import_and_load_s": loaded - started,
        "score_s": scored - loaded,
    },
    open(results_file, "w"),
)
