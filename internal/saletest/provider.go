package saletest

import (
	"context"
	"sync"

	"seckill/internal/sale"
)

// Provider is a payment provider the suites pay at (sale.PaymentProvider): its pages are
// pay.example's, and it gives back what it is asked to, once per refund id, counting.
type Provider struct {
	mu      sync.Mutex
	refunds map[string]int64 // refund id -> cents given back
	asked   int
}

// ProviderName is the suites' provider's name.
const ProviderName = "suite"

// Name implements sale.PaymentProvider.
func (*Provider) Name() string { return ProviderName }

// PayURL implements sale.PaymentProvider: the same page for the same payment.
func (*Provider) PayURL(_ context.Context, c sale.Checkout) (string, error) {
	return "https://pay.example/" + c.Payment.ID, nil
}

// Refund implements sale.PaymentProvider: done at once; a refund id asked again refunds once.
func (p *Provider) Refund(_ context.Context, pay sale.Payment, refundID string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	if p.refunds == nil {
		p.refunds = map[string]int64{}
	}
	if _, ok := p.refunds[refundID]; !ok {
		p.refunds[refundID] = pay.ReceivedCents
	}
	return true, nil
}

// Refunded returns the refunds made, by refund id, and how often one was asked for.
func (p *Provider) Refunded() (map[string]int64, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.refunds))
	for k, v := range p.refunds {
		out[k] = v
	}
	return out, p.asked
}
