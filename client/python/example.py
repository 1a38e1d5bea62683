#!/usr/bin/python3
"""kvsession from Python: create a session, stream a generation, fork it into
branches sampled in parallel, snapshot and restore.

    python3 client/python/example.py --server 127.0.0.1:50051 --prompt "Once upon a time"
    python3 client/python/example.py --server kvs.example:50051 --tls-ca ca.pem --api-key KEY
"""

import argparse
import concurrent.futures
import sys

from kvsession_client import Client


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", default="127.0.0.1:50051")
    parser.add_argument("--prompt", default="Once upon a time")
    parser.add_argument("-n", type=int, default=32)
    parser.add_argument("--branches", type=int, default=3)
    parser.add_argument("--tls-ca", help="the server's CA (PEM): connect with TLS")
    parser.add_argument("--tls-cert", help="client certificate (PEM) for mutual TLS (with --tls-key)")
    parser.add_argument("--tls-key", help="its private key (PEM)")
    parser.add_argument("--api-key", help="API key (default: $KVSESSION_API_KEY)")
    args = parser.parse_args()

    try:
        client = Client(args.server, tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key,
                        api_key=args.api_key)
    except ValueError as e:  # e.g. --tls-cert without --tls-key: never a quietly insecure channel
        parser.error(str(e))
    client.wait_ready()
    sid = client.create(args.prompt)
    print("session", sid)

    print("greedy:", end=" ", flush=True)
    for chunk in client.generate(sid, max_tokens=args.n, temperature=0):
        print(chunk.text, end="", flush=True)
    print()

    checkpoint = client.snapshot(sid, name="after-greedy")
    print("checkpoint", checkpoint.id, "at", checkpoint.length, "tokens")

    branches = client.fork(sid, args.branches)
    with concurrent.futures.ThreadPoolExecutor(len(branches)) as pool:
        texts = list(pool.map(lambda b: client.generate_all(b, args.n, temperature=1.0)[1], branches))
    for i, text in enumerate(texts):
        print("branch %d:%s" % (i + 1, text))

    restored = client.restore_checkpoint(checkpoint.id)
    _, text, _ = client.generate_all(restored, args.n, temperature=0)
    print("restored %s continues:%s" % (restored, text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
