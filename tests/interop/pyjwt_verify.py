"""Verifies an anteroom admission token with PyJWT (Debian's python3-jwt + python3-cryptography).

  pyjwt_verify.py jwks URL ALG TOKEN     the key from the server's JWKS (PyJWKClient, by kid)
  pyjwt_verify.py secret SECRET TOKEN    HS256 with the shared secret

Prints the claims as JSON and exits 0 when the token verifies; prints the error and exits 1
when PyJWT refuses it.
"""
import json
import sys

import jwt


def main():
    mode, arg, token = sys.argv[1], sys.argv[2], sys.argv[-1]
    required = {"require": ["exp", "iat", "sub"]}
    try:
        if mode == "jwks":
            alg = sys.argv[3]
            key = jwt.PyJWKClient(arg).get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=[alg], options=required)
        else:
            claims = jwt.decode(token, arg, algorithms=["HS256"], options=required)
    except jwt.PyJWTError as e:
        print(f"refused: {type(e).__name__}: {e}")
        return 1
    print(json.dumps(claims))
    return 0


if __name__ == "__main__":
    sys.exit(main())
