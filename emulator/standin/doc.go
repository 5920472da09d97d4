// Package standin manages the local AWS stand-in: moto in server mode,
// installed into the repository's own virtual environment (.venv) and
// started on 127.0.0.1.
//
// The stand-in answers on LocalStack's port (4566) for `make local`, so
// AWS_ENDPOINT_URL and every script work the same against LocalStack; when
// something already answers there it is reused rather than replaced. Probe
// tells what listens at an address by a real AWS call (STS
// GetCallerIdentity), waiting up to ProbePatience for a slow first answer,
// so that moto is never started on a port in use. Tests
// start their own instance on a free port through package standintest.
package standin
