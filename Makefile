# make test   set up if needed, then run every test
# make demo   set up if needed, then run the main job on the default backend
#             (VKGRAD_BACKEND=vulkan|numpy chooses; DEMO_ARGS="--steps 50" passes arguments)
PY := .venv/bin/python
SETUP := .venv/.vkgrad-setup

.PHONY: test demo setup clean
test: $(SETUP)
	$(PY) -m pytest tests

demo: $(SETUP)
	$(PY) examples/demo.py $(DEMO_ARGS)

setup: $(SETUP)

$(SETUP): pyproject.toml scripts/setup.sh scripts/build_kp.sh $(wildcard third_party/kompute/patches/*.patch)
	scripts/setup.sh
	touch $@

clean:
	rm -rf .venv build *.egg-info
