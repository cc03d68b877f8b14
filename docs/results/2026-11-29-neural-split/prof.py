"""Timeline of a cold CLI run: jax.monitoring duration events with their end times."""

import sys
import time

import jax

T0 = time.monotonic()
EVENTS = []


def on(event, duration, **kw):
    if duration > 0.2:
        EVENTS.append(
            (time.monotonic() - T0, event.split("/")[-1], duration, kw.get("fun_name", ""))
        )


def main():
    jax.monitoring.register_event_duration_secs_listener(on)
    from jaxcc import cli

    t1 = time.monotonic()
    try:
        rc = cli.main(sys.argv[1:])
    except SystemExit as e:
        rc = e.code
    end = time.monotonic() - T0
    for t, e, d, f in EVENTS:
        print(f"{t - d:7.1f} {t:7.1f} {d:6.2f} {e} {f}", file=sys.stderr)
    print(f"import {t1 - T0:.1f} total {end:.1f} rc {rc}", file=sys.stderr)


if __name__ == "__main__":
    main()
