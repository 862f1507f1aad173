-- +goose Up
-- The provider a payment was started with (signed, stripe, alipay, wechatpay): the one whose
-- notices settle it and whose refund API gives its money back. The payments made before were
-- all the signed callback's.
ALTER TABLE payments ADD COLUMN provider TEXT NOT NULL DEFAULT 'signed';

-- +goose Down
ALTER TABLE payments DROP COLUMN provider;
