# make test       set up if needed, then run every test
# make demo       set up if needed, then train the tiny transformer LM on the default backend
#                 (examples/train_lm.py; outputs in runs/demo; VKGRAD_BACKEND=vulkan|numpy
#                 chooses; DEMO_ARGS="--steps 50" passes arguments; each run starts over,
#                 --overwrite, unless DEMO_ARGS has --resume)
# make demo-mlp   the MLP classifier demo (examples/demo.py)
# make demo-cnn   a small ResNet on scikit-learn's 8x8 digits (examples/train_cnn.py; runs/cnn-digits)
PY := .venv/bin/python
SETUP := .venv/.vkgrad-setup

.PHONY: test demo demo-mlp demo-cnn setup clean
test: $(SETUP)
	$(PY) -m pytest tests

demo: $(SETUP)
	$(PY) examples/train_lm.py --model transformer --preset tiny --out runs/demo \
		$(if $(findstring --resume,$(DEMO_ARGS)),,--overwrite) $(DEMO_ARGS)

demo-mlp: $(SETUP)
	$(PY) examples/demo.py $(DEMO_ARGS)

demo-cnn: $(SETUP)
	$(PY) examples/train_cnn.py --out runs/cnn-digits \
		$(if $(findstring --resume,$(DEMO_ARGS)),,--overwrite) $(DEMO_ARGS)

setup: $(SETUP)

$(SETUP): pyproject.toml scripts/setup.sh scripts/build_kp.sh $(wildcard third_party/kompute/patches/*.patch)
	scripts/setup.sh
	touch $@

clean:
	rm -rf .venv build *.egg-info runs
