"""Manifests and signatures that survive a re-save (`tseal manifest`, `tseal sign`,
`tseal verify --signature`): keys made by the `cryptography` package, the model by
real torch, the re-saves by torch.save, tseal canon, tseal convert (safetensors, HF
shards, DCP); every bundle checked independently with `cryptography` (DSSE PAE over
the in-toto statement), and every way a signature must fail, failing by its rule."""
from __future__ import annotations

import base64
import json

import pytest
import torch
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from conftest import run_tseal

PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, body: bytes) -> bytes:
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    out = {}
    for name, key in (("ed25519", ed25519.Ed25519PrivateKey.generate()),
                      ("p256", ec.generate_private_key(ec.SECP256R1())),
                      ("p384", ec.generate_private_key(ec.SECP384R1()))):
        priv, pub = d / f"{name}.pem", d / f"{name}.pub"
        priv.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
        out[name] = (priv, pub, key.public_key())
    return out


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    sd = net.state_dict()
    torch.save(sd, d / "model.pt")
    return d, sd


def tseal_ok(*args) -> str:
    r = run_tseal(*args)
    assert r.returncode == 0, f"tseal {' '.join(map(str, args))}: {r.returncode}\n{r.stdout}{r.stderr}"
    return r.stdout


def resaves(d, src) -> list:
    """The same weights through every route a model takes: canon, safetensors, shards, DCP."""
    tseal_ok("canon", src, "-o", d / "canon.pt")
    tseal_ok("convert", d / "canon.pt", d / "model.safetensors")
    tseal_ok("convert", d / "model.safetensors", d / "shards", "--shards", "20KB")
    tseal_ok("convert", d / "shards", d / "dcp", "--world-size", "2")
    assert len(list((d / "shards").glob("model-*-of-*.safetensors"))) > 1
    return [src, d / "canon.pt", d / "model.safetensors", d / "shards", d / "dcp"]


@pytest.mark.parametrize("kind", ["ed25519", "p256", "p384"])
def test_signature_survives_every_resave_and_verifies_independently(keys, model, tmp_path, kind):
    d, _ = model
    priv, pub, public_key = keys[kind]
    sig = tmp_path / "model.sig.json"
    tseal_ok("sign", d / "model.pt", "--key", priv, "-o", sig)
    routes = resaves(tmp_path, d / "model.pt")
    manifests = {tseal_ok("manifest", p) for p in routes}
    assert len(manifests) == 1, "the manifest depends on the container"
    for p in routes:
        out = tseal_ok("verify", p, "--signature", sig, "--pub", pub)
        assert out.startswith(f"OK  {p}: signed by ") and ("ed25519" in out) == (kind == "ed25519")
    # Byte-level digests do not survive the same re-saves (what model-signing signs).
    import hashlib
    assert len({hashlib.sha256(p.read_bytes()).hexdigest() for p in routes[:3]}) == 3

    # The bundle, checked without tensorseal: Sigstore bundle, DSSE envelope, in-toto
    # statement equal to `tseal manifest`, signature over PAE(type, payload).
    bundle = json.loads(sig.read_text())
    assert bundle["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
    env = bundle["dsseEnvelope"]
    assert env["payloadType"] == PAYLOAD_TYPE
    payload = base64.b64decode(env["payload"], validate=True)
    assert payload.decode() == manifests.pop()
    statement = json.loads(payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"][0]["digest"]["tensorseal-content-sha256"] == \
        tseal_ok("hash", d / "model.pt").split()[0].removeprefix("sha256:")
    paths = [t["path"] for t in statement["predicate"]["tensors"]]
    assert paths == sorted(paths) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    raw = base64.b64decode(env["signatures"][0]["sig"], validate=True)
    if kind == "ed25519":
        public_key.verify(raw, pae(PAYLOAD_TYPE, payload))
    else:
        public_key.verify(raw, pae(PAYLOAD_TYPE, payload),
                          ec.ECDSA(hashes.SHA256() if kind == "p256" else hashes.SHA384()))


def test_a_changed_value_fails_naming_the_tensor(keys, model, tmp_path):
    d, sd = model
    priv, pub, _ = keys["ed25519"]
    sig = tmp_path / "s.json"
    tseal_ok("sign", d / "model.pt", "--key", priv, "-o", sig)
    changed = {k: v.clone() for k, v in sd.items()}
    changed["2.weight"][3, 5] += 1e-3
    torch.save(changed, tmp_path / "changed.pt")
    r = run_tseal("verify", tmp_path / "changed.pt", "--signature", sig, "--pub", pub)
    assert r.returncode == 1
    assert "[sign/content-mismatch]" in r.stdout and "'2.weight' (values changed)" in r.stdout
    assert "0.weight" not in r.stdout  # only what changed is named
    halved = {k: v.half() if k == "0.bias" else v for k, v in sd.items()}
    del halved["2.bias"]
    torch.save(halved, tmp_path / "halved.pt")
    r = run_tseal("verify", tmp_path / "halved.pt", "--signature", sig, "--pub", pub, "--json")
    assert r.returncode == 1
    f = json.loads(r.stdout)["files"][0]
    assert f["status"] == "corrupt" and f["rule"] == "sign/content-mismatch" and f["signature"] is None
    assert "'0.bias' (dtype float32 -> float16)" in f["message"] and "'2.bias' (missing)" in f["message"]
    ok = json.loads(run_tseal("verify", d / "model.pt", "--signature", sig, "--pub", pub, "--json").stdout)
    assert ok["ok"] and ok["files"][0]["signature"]["key_type"] == "ed25519"


def test_every_broken_signature_fails_by_its_rule(keys, model, tmp_path):
    d, _ = model
    priv, pub, _ = keys["ed25519"]
    sig = tmp_path / "s.json"
    tseal_ok("sign", d / "model.pt", "--key", priv, "-o", sig)
    bundle = json.loads(sig.read_text())

    def verify_with(b, key=pub) -> tuple[int, str]:
        p = tmp_path / "b.json"
        p.write_text(b if isinstance(b, str) else json.dumps(b))
        r = run_tseal("verify", d / "model.pt", "--signature", p, "--pub", key)
        return r.returncode, r.stdout + r.stderr

    rc, out = verify_with(bundle, keys["p256"][1])  # another key
    assert rc == 1 and "[sign/signature]" in out
    # An edited statement (a different content hash) no longer verifies.
    st = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    st["predicate"]["content_hash"] = "sha256:" + "0" * 64
    forged = json.loads(json.dumps(bundle))
    forged["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(st).encode()).decode()
    rc, out = verify_with(forged)
    assert rc == 1 and "[sign/signature]" in out
    for broken in ("not json", {"mediaType": "text/plain"}, {**bundle, "dsseEnvelope": {**bundle["dsseEnvelope"], "payload": "@@"}},
                   {**bundle, "dsseEnvelope": {**bundle["dsseEnvelope"], "payloadType": "text/plain"}}):
        rc, out = verify_with(broken)
        assert rc == 1 and "[sign/bundle]" in out, out
    # A bundle over 1 GiB (sparse: no disk used) is refused before any JSON parse.
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate((1 << 30) + 1)
    r = run_tseal("verify", d / "model.pt", "--signature", huge, "--pub", pub)
    assert r.returncode == 1 and "[sign/bundle]" in r.stderr + r.stdout and "1073741825 bytes" in r.stderr + r.stdout
    # Keys tensorseal does not sign with, and encrypted keys: refused, exit 2, nothing written.
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "rsa.pem").write_bytes(rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    enc = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "enc.pem").write_bytes(enc.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.BestAvailableEncryption(b"pw")))
    for key, words in (("rsa.pem", "rsaEncryption key"), ("enc.pem", "unencrypted PEM private key"), ("missing.pem", "cannot read")):
        r = run_tseal("sign", d / "model.pt", "--key", tmp_path / key, "-o", tmp_path / "out.json")
        assert r.returncode == 2 and "[sign/key]" in r.stderr and words in r.stderr, r.stderr
        assert not (tmp_path / "out.json").exists()
    r = run_tseal("verify", d / "model.pt", "--signature", sig)
    assert r.returncode == 2 and "--pub" in r.stderr
