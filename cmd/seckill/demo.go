package main

import (
	"context"
	"errors"
	"time"

	"seckill/internal/sale"
)

// demoID and demoPacketID name the demo activities.
const (
	demoID       = "demo"
	demoPacketID = "demo-redpacket"
)

// seedDemo creates the demo activities unless they exist: a flash sale (stock 100) and a red
// packet (100 shares of 100.00), each on from now for 30 days.
func seedDemo(ctx context.Context, svc *sale.Service) error {
	now := time.Now()
	for _, a := range []sale.Activity{
		{ID: demoID, Name: "Demo flash sale", Kind: sale.KindItem, Stock: 100, PriceCents: 999},
		{ID: demoPacketID, Name: "Demo red packet", Kind: sale.KindRedPacket, Stock: 100, TotalCents: 10_000},
	} {
		if _, err := svc.Activity(ctx, a.ID); !errors.Is(err, sale.ErrNotFound) {
			if err != nil {
				return err
			}
			continue
		}
		a.PerUserLimit, a.StartAt, a.EndAt = 1, now, now.Add(30*24*time.Hour)
		a.PayWindow, a.Admission = 15*time.Minute, sale.AdmitDirect
		if _, err := svc.CreateActivity(ctx, a); err != nil && !errors.Is(err, sale.ErrExists) {
			return err // ErrExists: another node, starting at the same time, seeded it
		}
	}
	return nil
}
