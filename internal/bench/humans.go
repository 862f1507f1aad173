package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"seckill/internal/auth"
)

// The people of a risk crowd are real Chromium pages of the product page, each in a browser
// context of its own (its own storage), with a browser of its own kind: a user agent, a
// screen, a language and a time zone drawn from common ones, so that their fingerprints are
// as varied as a crowd's, and collide as a crowd's do. Each looks at the page for a while, moves
// the pointer to the button along curved, uneven paths (or tabs to it and presses Enter, for
// the keyboard's users), and clicks: the page measures what it measures for everyone.

// browserLook is what a person's browser tells a page about itself.
type browserLook struct {
	UA, Platform, Lang, TZ string
	W, H                   int64
	Scale                  float64
}

var (
	userAgents = []struct{ ua, platform string }{
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36", "Win32"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "Win32"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", "Win32"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "MacIntel"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", "MacIntel"},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36", "Linux x86_64"},
		{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", "Win32"},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14.7; rv:133.0) Gecko/20100101 Firefox/133.0", "MacIntel"},
	}
	screens   = [][2]int64{{1920, 1080}, {1536, 864}, {1440, 900}, {1366, 768}, {1280, 800}, {2560, 1440}, {1680, 1050}}
	scales    = []float64{1, 1.25, 1.5, 2}
	languages = []string{"zh-CN", "en-US", "ja-JP", "de-DE", "en-GB"}
	zones     = []string{"Asia/Shanghai", "Asia/Tokyo", "Europe/Berlin", "America/New_York", "Asia/Singapore", "Europe/London"}
)

func drawLook(r *rand.Rand) browserLook {
	ua, s := userAgents[r.IntN(len(userAgents))], screens[r.IntN(len(screens))]
	return browserLook{UA: ua.ua, Platform: ua.platform, Lang: languages[r.IntN(len(languages))],
		TZ: zones[r.IntN(len(zones))], W: s[0], H: s[1], Scale: scales[r.IntN(len(scales))]}
}

// Browser is a Chromium that runs the pages of the risk crowd's people, and of scripts.
type Browser struct {
	ctx  context.Context
	stop func()
}

// NewBrowser starts the Chromium at chromium (headless).
func NewBrowser(ctx context.Context, chromium string) (*Browser, error) {
	dir, err := os.MkdirTemp("", "seckill-people-")
	if err != nil {
		return nil, err
	}
	// TMPDIR too: Chromium's singleton socket directory goes with dir, not left in /tmp.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(dir), chromedp.Env("TMPDIR="+dir))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, cancel := chromedp.NewContext(alloc)
	b := &Browser{ctx: bctx, stop: func() {
		cancel()
		cancelAlloc()
		os.RemoveAll(dir)
	}}
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		b.Close()
		return nil, fmt.Errorf("start %s: %w", chromium, err)
	}
	return b, nil
}

// Close stops the browser.
func (b *Browser) Close() { b.stop() }

// runPeople runs the people c.Tabs at a time, and returns how many pages failed to click and the
// first of their errors; err when not one page clicked (the browser, not the people).
func runPeople(ctx context.Context, c RiskCrowd, activity string, tokens *auth.Tokens, people []person, count func(string, int)) (failed int, first, err error) {
	if len(people) == 0 {
		return 0, nil, nil
	}
	b, err := NewBrowser(ctx, c.Chromium)
	if err != nil {
		return 0, nil, err
	}
	defer b.Close()
	tabs := c.Tabs
	if tabs <= 0 {
		tabs = 4
	}
	next := make(chan person)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range tabs {
		wg.Go(func() {
			for h := range next {
				tok, err := tokens.Mint(h.user, time.Now(), 2*time.Hour)
				if err == nil {
					_, err = b.visit(ctx, c.Base, activity, h.user, tok, h)
				}
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = fmt.Errorf("%s's page: %w", h.user, err)
					}
				}
				mu.Unlock()
				if err == nil {
					count(h.profile, 0) // the page's own grab: its answer is the page's to show
				}
			}
		})
	}
	for _, h := range people {
		select {
		case next <- h:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if failed == len(people) {
		return failed, firstErr, firstErr
	}
	return failed, firstErr, nil
}

// Person opens the product page of activity as a person would (a look and a pace drawn from
// seed), signed in as user with token, moves the pointer to the button and clicks; it returns
// what the page said of the grab.
func (b *Browser) Person(ctx context.Context, base, activity, user, token string, seed uint64) (string, error) {
	r := rand.New(rand.NewPCG(seed, 0x9e09))
	p := person{user: user, profile: ProfileHuman, look: drawLook(r), addr: drawAddr(r, netip.MustParsePrefix("100.64.0.0/10")),
		think: time.Duration(800+r.IntN(2000)) * time.Millisecond}
	return b.visit(ctx, base, activity, user, token, p)
}

// Script opens the product page of activity as a headless script does: the browser as it comes,
// signed in as user, the button clicked from the page's script as soon as it opens; it returns
// what the page said of the grab.
func (b *Browser) Script(ctx context.Context, base, activity, user, token string) (string, error) {
	return b.visit(ctx, base, activity, user, token, person{user: user, profile: profileScript, addr: "100.64.0.1"})
}

// profileScript is the page's own script clicking the button, for Browser.Script.
const profileScript = "script"

// visit is one visit: the page opened in a browser of the person's look, signed in, looked at,
// the pointer moved to the button (or the button reached by the keyboard, or clicked by a
// script), and clicked. It returns the page's status once the grab is answered.
func (b *Browser) visit(ctx context.Context, base, activity, user, token string, h person) (string, error) {
	tctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	tctx, cancelT := context.WithTimeout(tctx, 90*time.Second)
	defer cancelT()
	sess, _ := json.Marshal(map[string]string{"user": user, "token": token, "expiresAt": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)})
	l := h.look
	setup := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := cdp.Call(ctx, t, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, t, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"X-Forwarded-For": h.addr}})
		if err != nil || h.profile == profileScript { // a script runs the browser as it comes
			return err
		}
		if _, err := cdp.Call(ctx, t, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{
			UserAgent: l.UA, AcceptLanguage: l.Lang, Platform: l.Platform}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, t, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: l.Lang}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, t, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: l.TZ}); err != nil {
			return err
		}
		// The window shows a part of the screen, as a browser's does.
		_, err = cdp.Call(ctx, t, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: l.W - 40, Height: l.H - 160, DeviceScaleFactor: l.Scale, ScreenWidth: l.W, ScreenHeight: l.H})
		return err
	})
	if err := chromedp.Do(tctx, setup,
		chromedp.Navigate(base+"/"),
		chromedp.Evaluate[chromedp.Void](`localStorage.setItem("seckill.user", `+fmt.Sprintf("%q", sess)+`)`),
		chromedp.Navigate(base+"/activity/"+activity),
	); err != nil {
		return "", err
	}
	// A query, not a Poll of the page's script: a query looks the button up again in whatever
	// document the page shows by then, where a Poll evaluated in a context the page left fails
	// ("Cannot find context with specified id").
	wctx, cancel := context.WithTimeout(tctx, 30*time.Second)
	err := chromedp.Do(wctx, chromedp.WaitEnabled(chromedp.ID("grab")))
	cancel()
	if err != nil {
		return "", fmt.Errorf("the button never opened: %w", err)
	}
	r := rand.New(rand.NewPCG(uint64(len(user)), hashOf(user)))
	switch h.profile {
	case profileScript:
		err = chromedp.Do(tctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("grab").click()`))
	case ProfileKeyboard:
		err = chromedp.Do(tctx, chromedp.Sleep(h.think), chromedp.Evaluate[chromedp.Void](`document.getElementById("grab").focus()`),
			chromedp.Sleep(time.Duration(200+r.IntN(600))*time.Millisecond), chromedp.KeyEvent("\r"))
	default:
		type rect struct{ X, Y, W, H float64 }
		var bt rect
		if err = chromedp.Do(tctx, chromedp.Sleep(h.think)); err != nil {
			return "", err
		}
		bt, err = chromedp.Run(tctx, chromedp.Evaluate[rect](`(() => { const r = document.getElementById("grab").getBoundingClientRect();
			return {X: r.x, Y: r.y, W: r.width, H: r.height}; })()`))
		if err != nil {
			return "", err
		}
		tx, ty := bt.X+bt.W*(0.3+0.4*r.Float64()), bt.Y+bt.H*(0.3+0.4*r.Float64())
		err = chromedp.Do(tctx, pointerTo(r, float64(l.W-40), float64(l.H-160), tx, ty),
			chromedp.Sleep(time.Duration(80+r.IntN(400))*time.Millisecond), chromedp.MouseClickXY(tx, ty))
	}
	if err != nil {
		return "", err
	}
	return chromedp.Run(tctx, chromedp.Poll[string](`(() => { const s = document.getElementById("status").textContent;
		return s !== "" && s !== "Grabbing…" ? s : ""; })()`, chromedp.WithPollingTimeout(15*time.Second)))
}

// hashOf is the 64-bit FNV-1a hash of s: a seed of its own for each account.
func hashOf(s string) uint64 {
	var h uint64 = 1469598103934665603
	for _, b := range []byte(s) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return h
}

// pointerTo moves the mouse from somewhere in a w×h window to (tx, ty) as a hand does: along
// one to three curves (the first maybe a wander elsewhere), fast in the middle and slow at the
// ends, a little off the line, at the 60 to 125 events a second a mouse reports.
func pointerTo(r *rand.Rand, w, h, tx, ty float64) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		x, y := w*r.Float64(), h*r.Float64()
		var legs [][2]float64
		for range r.IntN(2) { // a wander first
			legs = append(legs, [2]float64{w * r.Float64(), h * r.Float64()})
		}
		if r.Float64() < 0.3 { // an overshoot, then back
			legs = append(legs, [2]float64{tx + 20 + 40*r.Float64(), ty + 10*r.NormFloat64()})
		}
		legs = append(legs, [2]float64{tx, ty})
		for _, to := range legs {
			dist := math.Hypot(to[0]-x, to[1]-y)
			// A curve: control points off the line by up to a third of its length.
			off := (r.Float64()*2 - 1) * dist / 3
			nx, ny := -(to[1]-y)/math.Max(dist, 1), (to[0]-x)/math.Max(dist, 1)
			c1 := [2]float64{x + (to[0]-x)/3 + nx*off, y + (to[1]-y)/3 + ny*off}
			c2 := [2]float64{x + 2*(to[0]-x)/3 + nx*off*r.Float64(), y + 2*(to[1]-y)/3 + ny*off*r.Float64()}
			steps := max(8, int(dist/(6+14*r.Float64())))
			step := time.Duration(8+r.IntN(9)) * time.Millisecond
			x0, y0 := x, y
			for i := 1; i <= steps; i++ {
				s := float64(i) / float64(steps)
				u := 1 - s
				px := u*u*u*x0 + 3*u*u*s*c1[0] + 3*u*s*s*c2[0] + s*s*s*to[0] + r.NormFloat64()*0.8
				py := u*u*u*y0 + 3*u*u*s*c1[1] + 3*u*s*s*c2[1] + s*s*s*to[1] + r.NormFloat64()*0.8
				if i == steps {
					px, py = to[0], to[1]
				}
				if _, err := cdp.Call(ctx, t, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: px, Y: py}); err != nil {
					return err
				}
				// Slow at the ends of a leg, quick in its middle, and uneven.
				d := float64(step) * (1 + 1.5*(1-math.Sin(math.Pi*s))) * (0.7 + 0.6*r.Float64())
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(d)):
				}
			}
			x, y = to[0], to[1]
			if to != [2]float64{tx, ty} {
				select { // a pause between legs
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(100+r.IntN(500)) * time.Millisecond):
				}
			}
		}
		return nil
	})
}
