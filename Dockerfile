# Builds the `dcm` binary on Debian 12 with the same packages CI uses (scripts/install-deps.sh).
FROM debian:12 AS build
WORKDIR /src
COPY . .
RUN ./scripts/install-deps.sh && \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDCM_BUILD_TESTS=OFF && \
    cmake --build build --target dcm

FROM debian:12
RUN apt-get update && apt-get install -y --no-install-recommends \
      librdkafka1 librocksdb7.8 libsimdjson14 libfmt9 libspdlog1.10 libjwt0 libjemalloc2 curl && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/src/dcm /usr/local/bin/dcm
EXPOSE 8080
ENTRYPOINT []
