# The default build needs no GPU and no cgo toolchain beyond the machine's;
# `make cuda` builds the GPU flavour into bin/cuda (see scripts/cuda);
# `make dist` builds the release artifacts into dist/ (see scripts/dist).

.PHONY: test cuda dist

test:
	go vet ./...
	go test ./...

cuda:
	scripts/cuda/build.sh bin/cuda

dist:
	scripts/dist
