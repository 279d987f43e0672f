# Tether — the two commands a new user needs:
#   make relay   run the companion relay locally (loopback, open admission)
#   make test    install what is missing, build, run every test
SWIFT ?= swift

.PHONY: deps build test bench relay clean

deps:
	./scripts/install-deps

build: deps
	$(SWIFT) build

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --parallel --xunit-output .build/test-results.xml
	@./scripts/test-summary .build/test-results.xml

bench: deps
	$(SWIFT) build -c release --product tether-bench
	.build/release/tether-bench

relay: deps
	$(SWIFT) build -c release --product tether
	.build/release/tether relay --local

clean:
	rm -rf .build
