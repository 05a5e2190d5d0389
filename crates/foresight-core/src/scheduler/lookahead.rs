//! What a forecast changes in its own copy of the scheduler before it runs ahead.

use super::LocalScheduler;

impl LocalScheduler {
    /// Changes how many waiting jobs may hold a reservation (forecasts use [`crate::policy::ALL`]).
    pub fn set_reservation_depth(&mut self, depth: u32) {
        self.policy.reservation_depth = depth;
    }

    /// Gives every job waiting for its begin time a reservation at its earliest start from
    /// its begin, after everything queued, in order of begin: what a forecast expects of
    /// jobs not eligible yet if nothing else arrived. Meant for a forecast's copy.
    pub fn place_deferred(&mut self) {
        for (begin, id) in std::mem::take(&mut self.deferred) {
            let Some(e) = self.jobs.remove(&id) else {
                continue;
            };
            self.enqueue(e.job);
            let Some(i) = self.queue.position(id) else {
                continue;
            };
            let procs = self.jobs[&id].job.procs;
            if let Some(p) = self.earliest(id, begin) {
                self.profile_mut(p.domain).take(p.start, p.end, procs);
                self.hold_licences(id, p.start, p.end, true);
                self.queue.set_reserved(i, true);
                self.count_unreserved(procs, -1);
                self.reserved.push(id);
                self.set_reservation(id, p);
            }
        }
    }
}
