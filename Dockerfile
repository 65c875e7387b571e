# Builds the hermes binary; docker-compose.yml runs it split by --actors.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/hermes /usr/local/bin/hermes
WORKDIR /var/lib/hermes
ENTRYPOINT ["hermes"]
