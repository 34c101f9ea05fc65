package claim

import iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"

// memoKey names one family of one claim (by uid) in told and pauses.
func memoKey(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) string {
	return string(c.UID) + "/" + string(f)
}

// tell records a waiting Event on the claim unless the same one was the
// last recorded for that family, and reports whether it recorded it.
func (r *Reconciler) tell(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily, eventType, reason, msg string) bool {
	if !r.told.Changed(memoKey(c, f), reason+"\x00"+msg) {
		return false
	}
	r.Recorder.Event(c, eventType, reason, msg)
	return true
}

// untell forgets the last waiting Event of a family that stopped waiting.
func (r *Reconciler) untell(c *iadv1alpha1.IPAddressClaim, f iadv1alpha1.IPFamily) {
	r.told.Forget(memoKey(c, f))
}

// report records an Event on the claim once per change of what is said
// about one of its concerns (key: a family, or "class"). An empty reason
// says there is nothing to report now, so the next report is a change
// again. It reports whether it recorded.
func (r *Reconciler) report(claim *iadv1alpha1.IPAddressClaim, key, eventType, reason, msg string) bool {
	value := ""
	if reason != "" {
		value = string(claim.UID) + "\x00" + reason + "\x00" + msg
	}
	if !r.reported.Changed(reportKey(claim.Namespace, claim.Name)+key, value) || reason == "" {
		return false
	}
	r.Recorder.Event(claim, eventType, reason, msg)
	return true
}

// reportKey is the prefix of a claim's keys in the report memo.
func reportKey(namespace, name string) string { return namespace + "/" + name + "/" }
