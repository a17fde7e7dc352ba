ATTNPATHS_ARGS="--causal" ATTNPATHS_LIMIT=260 bash bench/gpu_run.sh attnpaths transformer lmt
