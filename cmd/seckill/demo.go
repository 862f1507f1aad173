package main

import (
	"context"
	"errors"
	"time"

	"seckill/internal/sale"
)

// demoID, demoPacketID and demoQueueID name the demo activities.
const (
	demoID       = "demo"
	demoPacketID = "demo-redpacket"
	demoQueueID  = "demo-queue"
)

// seedDemo creates the demo activities unless they exist: a flash sale (stock 100) and a red
// packet (100 shares of 100.00), each on from now for 30 days, and a sale through a waiting line
// (stock 20, one admission a second) that starts two minutes from now: join it before, and the
// early crowd is shuffled at the start. It returns the demo activities this database already held
// that have ended: a data directory kept from a start over 30 days ago holds a demo that is over,
// and the banner says so rather than show a newcomer a sale that never opens.
func seedDemo(ctx context.Context, svc *sale.Service, now time.Time) (ended []string, err error) {
	for _, a := range []sale.Activity{
		{ID: demoID, Name: "Demo flash sale", Kind: sale.KindItem, Stock: 100, PriceCents: 999},
		{ID: demoPacketID, Name: "Demo red packet", Kind: sale.KindRedPacket, Stock: 100, TotalCents: 10_000},
		{ID: demoQueueID, Name: "Demo waiting line", Kind: sale.KindItem, Stock: 20, PriceCents: 4_999,
			Admission: sale.AdmitQueue, AdmitRate: 1, StartAt: now.Add(2 * time.Minute)},
	} {
		if old, err := svc.Activity(ctx, a.ID); !errors.Is(err, sale.ErrNotFound) {
			if err != nil {
				return nil, err
			}
			if !now.Before(old.EndAt) {
				ended = append(ended, a.ID)
			}
			continue
		}
		if a.StartAt.IsZero() {
			a.StartAt = now
		}
		if a.Admission == "" {
			a.Admission = sale.AdmitDirect
		}
		a.PerUserLimit, a.EndAt, a.PayWindow = 1, now.Add(30*24*time.Hour), 15*time.Minute
		if _, err := svc.CreateActivity(ctx, a); err != nil && !errors.Is(err, sale.ErrExists) {
			return nil, err // ErrExists: another node, starting at the same time, seeded it
		}
	}
	return ended, nil
}
