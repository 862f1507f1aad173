-- +goose Up
-- The provider's own name for a payment, from its notice of the money (Stripe's PaymentIntent,
-- Alipay's trade_no, WeChat Pay's transaction_id): what its refund call names.
ALTER TABLE payments ADD COLUMN provider_ref TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE payments DROP COLUMN provider_ref;
