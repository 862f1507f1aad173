package saletest

import (
	"context"

	"seckill/internal/sale"
)

// Provider is a payment provider the suites pay at (sale.PaymentProvider): its pages are
// pay.example's, and a refund asked of it is done at once. The suites settle its payments
// themselves, as its notices would.
type Provider struct{}

// ProviderName is the suites' provider's name.
const ProviderName = "suite"

// Name implements sale.PaymentProvider.
func (*Provider) Name() string { return ProviderName }

// Takes implements sale.PaymentProvider: any currency.
func (*Provider) Takes(string) bool { return true }

// PayURL implements sale.PaymentProvider: the same page for the same payment.
func (*Provider) PayURL(_ context.Context, c sale.Checkout) (string, error) {
	return "https://pay.example/" + c.Payment.ID, nil
}

// Refund implements sale.PaymentProvider: done at once.
func (*Provider) Refund(context.Context, sale.Payment, string) (bool, error) { return true, nil }
