-- The nonces of signed requests (a site's to its centre, a peer's to the holder of an input)
-- seen within the window their timestamps stay valid: a request captured on the wire is
-- refused by a restarted service, or by a standby that took over, as by the one that first
-- took it. Rows older than the window are forgotten as new ones come.
CREATE TABLE signed_nonces (
    signer TEXT NOT NULL,
    nonce TEXT NOT NULL,
    seen_at BIGINT NOT NULL,
    PRIMARY KEY (signer, nonce)
);
CREATE INDEX signed_nonces_seen_at ON signed_nonces (seen_at);
